"""Same rows as verifiers, round 3: shapes found in environments nobody here wrote, each in a tiny environment
(tests/verifiers_envs/), run by verifiers' own evaluator and by `prime eval run` against one deterministic model
(tests/support/hash_server.py), compared example by example (helpers in tests/support/verifiers_parity.py).

- `vf_tool_null`: a reward that reads the tool-calling reply's `content` (verifiers keeps `None`, and sends
  `content: null` back on the next request);
- `vf_setup_prompt`: a `setup_state` that prepends a system message to `state["prompt"]` (clockbench's shape):
  the row's prompt is the rewritten one;
- `--shuffle`: `example_id` is the example's own index in its split, not its position in the selection;
- `vf_v1_src`: a v1 package in `src/` layout, run through the path form.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

verifiers = pytest.importorskip("verifiers", reason="needs a verifiers extra (make test installs both generations)")

from support.hash_server import HashServer  # noqa: E402
from support.verifiers_parity import KEY_VAR, TOML, comparable, rows_of, run  # noqa: E402

pytestmark = pytest.mark.verifiers
LEGACY = str(verifiers.__version__).startswith("0.3.")
"""verifiers 0.3.1 (the legacy API and vf-eval's legacy evaluator) is installed."""
ROUND3_ENVS = ("vf_tool_null", "vf_setup_prompt", "vf_tools")


@pytest.fixture(scope="module")
def server():
    started = HashServer()
    yield started
    started.stop()


def config(project: Path, name: str, url: str, out: str, extra: str, url_key: str) -> Path:
    evals = "".join(f'\n[[eval]]\nenv_id = "{env}"\nenv_args = {{num_examples = 6}}\n' for env in ROUND3_ENVS)
    path = project / name
    path.write_text(TOML.format(url_key=url_key, url=url, key=KEY_VAR, out=project / out, extra=extra) + evals)
    return path


def usage(rows: list[dict]) -> list[tuple[int, float, float]]:
    return sorted((r["example_id"], float(r["token_usage"]["input_tokens"]), float(r["token_usage"]["output_tokens"]))
                  for r in rows)


@pytest.mark.skipif(not LEGACY, reason="legacy environments need verifiers 0.3.1")
def test_legacy_round3_shapes_give_the_rows_vf_eval_gives(verifiers_project, server):
    project = verifiers_project
    folders = [project / "environments" / env for env in ROUND3_ENVS]
    vf_toml = config(project, "vf.toml", server.base_url, "vf-out",
                     "save_results = true\ndisable_tui = true\nshuffle = true\nshuffle_seed = 3", "api_base_url")
    done = run(project, ["-c", "import sys; from verifiers.legacy.scripts.eval import main; sys.exit(main())",
                         str(vf_toml)], folders)
    assert done.returncode == 0, done.stderr[-3000:]
    pk_toml = config(project, "pk.toml", server.base_url, "pk-out", "shuffle = true\nseed = 3", "base_url")
    done = run(project, ["-m", "primekit_cli", "eval", "run", str(pk_toml)], [Path.cwd()])
    assert done.returncode == 0, done.stderr[-3000:]

    for env in ROUND3_ENVS:
        theirs, ours = rows_of(project / "vf-out", env), rows_of(project / "pk-out", env)
        assert len(ours) == len(theirs) == 6, env
        assert all(r["error"] is None for r in ours), (env, [r["error"] for r in ours])
        assert comparable(ours) == comparable(theirs), env
        assert {r["example_id"] for r in ours} == {r["example_id"] for r in theirs}, env
        assert usage(ours) == usage(theirs), env  # legacy rows: every call's prompt summed, as verifiers 0.3.1

    ids = {r["example_id"] for r in rows_of(project / "pk-out", "vf_tools")}
    assert ids != {0, 1, 2}  # shuffled: the tasks' own indices, not positions 0..2
    null = rows_of(project / "pk-out", "vf_tool_null")
    assert 1.0 in {r["reward"] for r in null}  # the environment saw content None, as under vf-eval
    first = next(m for r in null if r["reward"] == 1.0 for m in r["completion"] if m["role"] == "assistant")
    assert first["content"] is None and first["tool_calls"]
    prefixed = rows_of(project / "pk-out", "vf_setup_prompt")
    assert [m["role"] for m in prefixed[0]["prompt"]] == ["system", "user"]
    assert prefixed[0]["prompt"][0]["content"] == "Answer with the sum in <answer></answer> tags."


def test_a_src_layout_package_runs_through_the_path_form(verifiers_project, server):
    project = verifiers_project
    done = run(project, ["-m", "primekit_cli", "eval", "run", "./environments/vf_v1_src", "-m", "hash-model",
                         "-b", server.base_url, "-k", KEY_VAR, "-n", "3", "-r", "1", "-o", "out"], [Path.cwd()])
    assert done.returncode == 0, done.stderr[-3000:]
    (results,) = (project / "out").glob("evals/*/*/results.jsonl")
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(rows) == 3 and all(r["error"] is None for r in rows)
    assert set(rows[0]["metrics"]) == {"correct"}
    assert sorted(r["prompt"][-1]["content"] for r in rows) == ["What is 0+0?", "What is 1+3?", "What is 2+6?"]


def test_shuffled_native_rows_keep_their_own_index():
    """A primekit environment under --shuffle: the plan's example ids are the rows' indices in their split."""
    from evalkit.envs.base import SingleTurnEnv
    from evalkit.envs.rubric import Rubric
    from evalkit.eval.config import EvalConfig
    from evalkit.eval.plan import select_examples

    env = SingleTurnEnv(dataset=[{"question": f"q{i}", "answer": str(i)} for i in range(10)],
                        rubric=Rubric(funcs=[lambda completion, answer: 0.0]))
    for shuffle in (True, False):
        config = EvalConfig(env_id="numbers", num_examples=4, shuffle=shuffle, seed=5)
        examples = select_examples(config, env)
        assert [row["answer"] for row in examples.values()] == [str(i) for i in examples]
        assert (list(examples) != [0, 1, 2, 3]) is shuffle


def test_v1_input_tokens_are_counted_as_verifiers_counts_them(verifiers_project):
    """A two-call v1 rollout: `input_tokens` is verifiers' own `num_input_tokens` (fed-in tokens counted once),
    read back from the run's traces.jsonl with verifiers' reader; the per-call sum keeps its own name."""
    import os
    import subprocess
    import sys

    from support.solver_server import SolverServer

    from evalkit.verifiers_compat.v1.api import read_episodes

    solver = SolverServer()
    try:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HOME": str(verifiers_project / "home")}
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "primekit_cli",
                "eval",
                "run",
                "vf-v1-shared",
                "-m",
                "solver",
                "-b",
                solver.base_url,
                "-n",
                "2",
                "-r",
                "1",
                "-o",
                "out",
            ],
            cwd=verifiers_project,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        solver.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    (folder,) = [p.parent for p in (verifiers_project / "out").glob("evals/*/*/results.jsonl")]
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    episodes = read_episodes(folder)
    assert len(rows) == len(episodes) == 2
    assert sorted(r["token_usage"]["input_tokens"] for r in rows) == sorted(e.num_input_tokens for e in episodes)
    for row in rows:
        usage = row["token_usage"]
        assert usage["input_tokens"] < usage["input_tokens_per_call"]  # two calls: the second prompt is not new
