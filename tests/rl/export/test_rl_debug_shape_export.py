"""A config in the shape of prime-rl's own ``configs/debug/algo/*.toml`` (full fine-tuning, eval sources of their own,
several sources without ratios) plans as prime-rl means it, and `prime rl export --target prime-rl` writes it back so
that prime-rl's own config classes load the same algorithms, sources and evaluation (where PRIME_RL_PYTHON is given)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest
from support import REPO, with_pythonpath
from support.prime_rl import prime_rl_python
from typer.testing import CliRunner

from primekit_cli.app import app
from rl_backend.config import load_rl_config

pytestmark = pytest.mark.skipif(importlib.util.find_spec("verifiers") is None,
                                reason="needs the verifiers extra: pip install 'primekit[verifiers]'")
TEACHER = '[orchestrator.algo.teacher]\nname = "Qwen/Qwen3-4B"\nbase_url = "http://localhost:8001/v1"\n'
ALGOS = {
    "grpo": 'type = "grpo"\n',
    "max_rl": 'type = "max_rl"\n',
    "opd": 'type = "opd"\n' + TEACHER,
    "sft": 'type = "sft"\n[orchestrator.algo.sampling.source]\nname = "Qwen/Qwen3-4B"\n'
           'base_url = "http://localhost:8001/v1"\n',
    "opsd": 'type = "opsd"\ndemo_key = "answer"\n',
    "echo": 'type = "echo"\n[orchestrator.algo.roles.user]\nalpha = 0.1\n',
}


def _source(name: str, table: str, algo: str = "") -> str:
    text = (f'[[orchestrator.{table}.source]]\nname = "{name}"\n[orchestrator.{table}.source.env.taskset]\n'
            f'id = "digit-sums"\n[orchestrator.{table}.source.env.agent.harness]\nid = "null"\n'
            f'[orchestrator.{table}.source.env.agent.runtime]\ntype = "subprocess"\n')
    return text + (f'[orchestrator.{table}.source.algo]\n{algo}' if algo else "")


def _config(algo: str, mixed: bool = False) -> str:
    sources = _source("sums", "train") + (_source("sums-opd", "train", ALGOS["opd"].replace(
        "orchestrator.algo.teacher", "orchestrator.train.source.algo.teacher")) if mixed else "")
    return (f'max_steps = 3\nseq_len = 1024\n[model]\nname = "HuggingFaceTB/SmolLM2-135M-Instruct"\n'
            f'[orchestrator]\nbatch_size = 8\ngroup_size = 4\n[orchestrator.algo]\n{ALGOS[algo]}'
            f'[orchestrator.train.sampling]\nmax_completion_tokens = 32\n{sources}'
            f'[orchestrator.eval]\ninterval = 2\nnum_examples = 8\n[orchestrator.eval.sampling]\n'
            f'max_completion_tokens = 32\n{_source("held-out", "eval")}[trainer.optim]\nlr = 3e-6\n[ckpt]\n')


def _export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> Path:
    config, out = tmp_path / "debug.toml", tmp_path / "debug.prime-rl.toml"
    config.write_text(text)
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(app, ["rl", "export", str(config), "--target", "prime-rl", "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_the_debug_shape_reads_as_prime_rl_means_it(tmp_path, monkeypatch):
    """No [trainer.model.lora] is full fine-tuning there; sources without a ratio are drawn 1:1; eval sources are
    their own environments."""
    path = tmp_path / "debug.toml"
    path.write_text(_config("grpo", mixed=True))
    config = load_rl_config(path)
    assert config.trainer.lora is None and config.buffer.env_ratios == [1.0, 1.0]
    assert [e.label for e in config.eval.env] == ["held-out"]
    back = load_rl_config(_export(tmp_path, monkeypatch, _config("grpo", mixed=True)))
    assert back.trainer.lora is None and back.buffer.env_ratios == [1.0, 1.0]
    assert [e.label for e in back.eval.env] == ["held-out"] and back.eval.interval == 2
    assert [e.algo and e.algo.type for e in back.env] == [None, "opd"]


VALIDATE = """
import json, sys
from pydantic_config import cli
from prime_rl.configs.rl import RLConfig
c = cli(RLConfig, args=["@", sys.argv[1]])
o = c.orchestrator
print(json.dumps({"algo": o.algo.type, "sources": [[s.name, s.ratio, s.algo.type] for s in o.train.source],
                  "eval": [s.name for s in o.eval.source], "lora": c.trainer.model.lora is not None,
                  "group_size": [s.group_size for s in o.train.source]}))
"""


@pytest.mark.parametrize("algo, mixed", [(name, False) for name in ALGOS] + [("grpo", True)])
def test_prime_rls_own_classes_load_the_exported_algorithm(tmp_path, monkeypatch, algo, mixed):
    python = prime_rl_python()
    if python is None:
        pytest.skip("prime-rl's config package is not importable (set PRIME_RL_PYTHON; docs/cluster.md)")
    out = _export(tmp_path, monkeypatch, _config(algo, mixed))
    result = subprocess.run([python, "-c", VALIDATE, str(out)], capture_output=True, text=True, cwd=tmp_path,
                            timeout=300, env=with_pythonpath(REPO / "environments" / "digit_sums"))
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    sources = [["sums", 1.0, algo]] + ([["sums-opd", 1.0, "opd"]] if mixed else [])
    assert loaded == {"algo": algo, "sources": sources, "eval": ["held-out"], "lora": False,
                      "group_size": [4] * len(sources)}
