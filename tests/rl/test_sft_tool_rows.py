"""`prime sft run` trains on the rows `prime data from-eval` writes for tool calls.

The rows come from a real eval: a native ToolEnv against tests/support/solver_server.py, which answers "What is
A+B?" with a call of ``add``, then `prime data from-eval`; the same rows with ``content: null`` beside each call
(what OpenAI's API sends and a chat dataset from elsewhere holds) are trained too. Before, the embedded
model's chat template concatenated that ``None`` (a jinja ``UndefinedError`` traceback), a row whose ``tools`` was
not a list gave a ValueError traceback, and the tool call itself was never trained (the template drops
``tool_calls``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO, with_pythonpath
from support.solver_server import SolverServer
from support.tiny_model import write_tiny_model
from typer.testing import CliRunner

from primekit_cli.app import app
from rl_backend.sft_samples import load_samples, read_rows

ENV = '''
from evalkit.envs import Rubric, ToolEnv


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: first number
        b: second number
    """
    return a + b


def says_sum(completion, answer) -> float:
    return float(answer in str(completion[-1].get("content") or ""))


def load_environment(**kwargs):
    rows = [{"question": f"What is {i}+{i + 3}?", "answer": str(2 * i + 3)} for i in range(4)]
    return ToolEnv(dataset=rows, eval_dataset=rows, tools=[add], rubric=Rubric([says_sum]), max_turns=3)
'''


@pytest.fixture(scope="module")
def tool_rows(tmp_path_factory) -> Path:
    """`prime data from-eval`'s dataset of a tool-calling eval."""
    project = tmp_path_factory.mktemp("tools")
    (project / "environments" / "adder").mkdir(parents=True)
    (project / "environments" / "adder" / "adder.py").write_text(ENV)
    server = SolverServer()
    try:
        ran = subprocess.run([sys.executable, "-m", "primekit_cli", "eval", "run", "adder", "-m", "solver", "-b",
                              server.base_url, "-n", "4", "-r", "1", "-o", "out"], cwd=project, capture_output=True,
                             text=True, timeout=300, env=with_pythonpath(REPO, env={"PATH": "/usr/bin:/bin",
                                                                                    "OPENAI_API_KEY": "x"}))
    finally:
        server.stop()
    assert ran.returncode == 0, ran.stderr[-2000:]
    [run_dir] = list((project / "out" / "evals").glob("*/*"))
    result = CliRunner().invoke(app, ["data", "from-eval", str(run_dir), "-o", str(project / "rows.jsonl")])
    assert result.exit_code == 0, result.output
    return project / "rows.jsonl"


def _with_null_content(rows_file: Path, out: Path) -> Path:
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    for row in rows:
        for message in row["completion"]:
            if message.get("tool_calls"):
                assert message["content"] in ("", None)
                message["content"] = None
    out.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return out


@pytest.mark.parametrize("content", ["as written", "null"])
def test_the_embedded_models_template_trains_the_tool_call(tool_rows, tmp_path, content):
    from evalkit.model.loading import _load_cached_tokenizer
    from evalkit.model.registry import resolve_model

    folder = resolve_model("local/smollm2-135m").converted_dir()
    if not (folder / "tokenizer.json").is_file():
        pytest.skip("the embedded model has not been converted on this machine (any `prime eval run` does it)")
    tokenizer = _load_cached_tokenizer(folder)
    rows_file = tool_rows if content == "as written" else _with_null_content(tool_rows, tmp_path / "null.jsonl")
    samples = load_samples(rows_file, read_rows(rows_file), tokenizer)
    assert len(samples) == 4
    trained = tokenizer.decode([t for t, keep in zip(samples[0].completion_ids, samples[0].loss_mask) if keep])
    assert '<tool_call>{"name": "add", "arguments": {"a": 0, "b": 3}}</tool_call>' in trained
    assert "The answer is 3." in trained


def test_sft_runs_on_the_rows_and_refuses_tools_that_are_not_a_list(tool_rows, tmp_path):
    model = write_tiny_model(tmp_path / "tiny")
    config = tmp_path / "sft.toml"
    rows_file = _with_null_content(tool_rows, tmp_path / "null.jsonl")
    config.write_text(f'model = "{model}"\ndata = "{rows_file}"\nbatch_size = 2\nmax_steps = 1\n'
                      '[trainer]\nlr = 1e-3\nlora = false\ndevice = "cpu"\n')
    result = CliRunner().invoke(app, ["sft", "run", str(config), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output

    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    rows[1]["tools"] = {"type": "function", "function": {"name": "add"}}  # one schema, not a list of them
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(row) + "\n" for row in rows))
    config.write_text(config.read_text().replace(str(rows_file), str(bad)))
    refused = subprocess.run([sys.executable, "-m", "primekit_cli", "sft", "run", str(config), "-o",
                              str(tmp_path / "out2")], capture_output=True, text=True, timeout=300,
                             env=with_pythonpath(REPO))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    [line] = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert f"{bad} row 2: 'tools' must be a list of tool schemas" in line
