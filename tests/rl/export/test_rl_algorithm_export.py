"""`prime rl export --target prime-rl` writes ``[algo]`` as ``[orchestrator.algo]`` and an ``[[env]]``'s own ``algo``
as its source's; targets that run GRPO-style credit only refuse another algorithm by name."""

from __future__ import annotations

import importlib.util
import tomllib

import pytest
from support import REPO
from typer.testing import CliRunner

from primekit_cli.app import app

pytestmark = pytest.mark.skipif(importlib.util.find_spec("verifiers") is None,
                                reason="needs the verifiers extra: pip install 'primekit[verifiers]'")
TEACHER = ["--algo.teacher.name", "Qwen/Qwen3-4B", "--algo.teacher.base_url", "http://localhost:8001/v1",
           "--algo.teacher.api_key_var", "TEACHER_KEY"]


def _export(monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str]:
    """The exit code, and the exported file (stdout) or the error."""
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(app, ["rl", "export", "configs/rl/digit-sums.toml", *args])
    return result.exit_code, result.stdout if result.exit_code == 0 else result.output


def test_opd_and_a_per_source_algo_export(monkeypatch):
    env = '[{id = "digit-sums", algo = {type = "max_rl"}}, {id = "digit-sums", name = "b"}]'
    code, out = _export(monkeypatch, "--target", "prime-rl", "--algo.type", "opd", *TEACHER, "--env", env,
                        "--buffer.env_ratios", "[1, 1]")
    assert code == 0, out
    data = tomllib.loads(out[out.index("# prime-rl v"):])
    assert data["orchestrator"]["algo"] == {"type": "opd", "teacher": {
        "name": "Qwen/Qwen3-4B", "base_url": "http://localhost:8001/v1", "api_key_var": "TEACHER_KEY"}}
    assert [s.get("algo") for s in data["orchestrator"]["train"]["source"]] == [{"type": "max_rl"}, None]


def test_a_local_teacher_folder_is_not_exported(monkeypatch):
    code, out = _export(monkeypatch, "--target", "prime-rl", "--algo.type", "opd", "--algo.teacher.name", "./teacher")
    assert code == 2 and "algo.teacher './teacher' is a local folder, and prime-rl reaches a teacher only as an " \
        "endpoint" in out, out


def test_sft_exports_its_teacher_as_the_sampling_source(monkeypatch):
    code, out = _export(monkeypatch, "--target", "prime-rl", "--algo.type", "sft", "--algo.sampling.source.name",
                        "Qwen/Qwen3-4B", "--algo.sampling.source.base_url", "http://localhost:8001/v1")
    assert code == 0, out
    assert tomllib.loads(out[out.index("# prime-rl v"):])["orchestrator"]["algo"] == {
        "type": "sft", "sampling": {"source": {"name": "Qwen/Qwen3-4B", "base_url": "http://localhost:8001/v1"}}}
    code, out = _export(monkeypatch, "--target", "prime-rl", "--algo.type", "sft", "--algo.sampling.source.name",
                        "./teacher")
    assert code == 2 and "algo.sampling.source './teacher' is a local folder" in out, out


def test_opsd_exports_its_demonstration_key(monkeypatch):
    code, out = _export(monkeypatch, "--target", "prime-rl", "--algo.type", "opsd", "--algo.demo_key", "answer")
    assert code == 0, out
    assert tomllib.loads(out[out.index("# prime-rl v"):])["orchestrator"]["algo"] == {"type": "opsd",
                                                                                     "demo_key": "answer"}


def test_echo_roles_and_length_penalty_keep_prime_rls_names(monkeypatch):
    code, out = _export(monkeypatch, "--target", "prime-rl", "--algo.type", "echo", "--algo.roles.user.alpha", "0.05",
                        "--algo.length_penalty.num_turns_weight", "0")
    assert code == 0, out
    algo = tomllib.loads(out[out.index("# prime-rl v"):])["orchestrator"]["algo"]
    assert algo == {"type": "echo", "roles": {"user": {"alpha": 0.05}},
                    "length_penalty": {"type": "linear", "num_output_tokens_weight": 0.25,
                                       "num_input_tokens_weight": 0.1, "num_turns_weight": 0.0}}


def test_plain_grpo_exports_as_before(monkeypatch):
    code, out = _export(monkeypatch, "--target", "prime-rl")
    assert code == 0 and tomllib.loads(out[out.index("# prime-rl v"):])["orchestrator"]["algo"] == {"type": "grpo"}


@pytest.mark.parametrize("target", ["skyrl", "tinker"])
def test_grpo_only_targets_refuse_another_algorithm(monkeypatch, target):
    code, out = _export(monkeypatch, "--target", target, "--algo.type", "max_rl")
    assert code == 2 and "algo = set has no" in out and "prime-rl carries [algo]" in out, out


def test_dppo_exports_as_prime_rls_default_loss(monkeypatch):
    code, out = _export(monkeypatch, "--target", "prime-rl", "--trainer.loss.type", "dppo",
                        "--trainer.loss.kl_tau", "0.01")
    assert code == 0, out
    assert tomllib.loads(out[out.index("# prime-rl v"):])["trainer"]["loss"] == {
        "type": "default", "dppo_mask_low": 0.2, "dppo_mask_high": 0.2, "adv_tau": 1.0, "kl_tau": 0.01}


PRIME_RL_OPD = """max_steps = 5
seq_len = 1024
[model]
name = "HuggingFaceTB/SmolLM2-135M-Instruct"
[orchestrator]
batch_size = 16
group_size = 4
[orchestrator.algo]
type = "opd"
[orchestrator.algo.teacher]
name = "Qwen/Qwen3-4B"
base_url = "http://localhost:8001/v1"
[orchestrator.train.sampling]
max_completion_tokens = 32
[[orchestrator.train.source]]
name = "sums"
[orchestrator.train.source.env.taskset]
id = "digit-sums"
[orchestrator.train.source.env.agent.harness]
id = "null"
[orchestrator.train.source.env.agent.runtime]
type = "subprocess"
[[orchestrator.train.source]]
name = "sums-max-rl"
[orchestrator.train.source.env.taskset]
id = "digit-sums"
[orchestrator.train.source.algo]
type = "max_rl"
"""


def test_a_prime_rl_opd_config_with_a_per_source_algo_plans_for_prime_rl_and_exports_back(tmp_path, monkeypatch):
    """primekit plans opd itself (the teacher is checked when the run starts) and hands it to prime-rl as written."""
    config = tmp_path / "opd.toml"
    config.write_text(PRIME_RL_OPD)
    monkeypatch.chdir(REPO)
    own = CliRunner().invoke(app, ["rl", "run", str(config), "--dry-run", "-o", str(tmp_path / "o"),
                                   "--buffer.env_ratios", "[1, 1]"])
    assert own.exit_code == 0 and "teacher Qwen/Qwen3-4B at http://localhost:8001/v1" in own.output, own.output
    result = CliRunner().invoke(app, ["rl", "run", str(config), "--backend", "prime-rl", "--dry-run", "--skip-baseline",
                                      "-o", str(tmp_path / "o"), "--buffer.env_ratios", "[1, 1]"])
    assert result.exit_code == 0, result.output
    teacher = "teacher Qwen/Qwen3-4B at http://localhost:8001/v1"
    assert f"algorithm    opd (ref_kl on sampled tokens), {teacher}" in result.stdout
    assert "             sums-max-rl: max_rl (rl on sampled tokens)" in result.stdout
    exported = tomllib.loads(result.stdout[result.stdout.index("# prime-rl v"):])
    assert exported["orchestrator"]["algo"]["type"] == "opd"
    algo = exported["orchestrator"]["algo"]
    assert algo["teacher"] == {"name": "Qwen/Qwen3-4B", "base_url": "http://localhost:8001/v1"}
    assert [s.get("algo") for s in exported["orchestrator"]["train"]["source"]] == [None, {"type": "max_rl"}]
    assert exported["orchestrator"]["group_size"] == 4
    assert exported["model"]["name"] == "HuggingFaceTB/SmolLM2-135M-Instruct"


def test_the_export_reads_back_as_the_same_run(tmp_path, monkeypatch):
    """primekit -> prime-rl's current shape -> primekit: the keys that say what is trained come back."""
    from rl_backend.config import load_rl_config

    out = tmp_path / "back.prime-rl.toml"
    env = ('[{id = "digit-sums", args = {num_tasks = 50}, algo = {type = "rae", decay = 0.9}}, '
           '{id = "digit-sums", name = "b"}]')
    code, text = _export(monkeypatch, "--target", "prime-rl", "-o", str(out), "--algo.type", "max_rl", "--env", env,
                         "--buffer.env_ratios", "[3, 1]", "--trainer.loss.type", "dppo", "--trainer.lr", "3e-5")
    assert code == 0, text
    original = load_rl_config(REPO / "configs" / "rl" / "digit-sums.toml")
    back = load_rl_config(out)
    assert back.model == original.model and back.max_steps == original.max_steps
    assert (back.batch_size, back.rollouts_per_example, back.max_concurrent) == (32, 8, original.max_concurrent)
    assert back.sampling.max_tokens == 32 and back.trainer.lr == 3e-5 and back.trainer.lora == original.trainer.lora
    assert back.algo.type == "max_rl" and back.trainer.loss.type == "dppo" and back.trainer.loss.kl_tau == 1e-3
    assert [(e.id, e.label, e.args, e.algo and e.algo.model_dump()) for e in back.env] == [
        ("digit-sums", "digit-sums", {"num_tasks": 50}, {"type": "rae", "decay": 0.9}), ("digit-sums", "b", {}, None)]
    assert back.buffer.env_ratios == [3, 1] and back.filter.enabled
    assert (back.eval.interval, back.eval.num_examples, back.ckpt.interval, back.ckpt.keep_last) == (10, 32, 10, 2)


@pytest.mark.parametrize("args, algo", [
    (["--algo.type", "sft", "--algo.sampling.source.name", "Qwen/Qwen3-4B", "--algo.sampling.source.base_url",
      "http://localhost:8001/v1"],
     {"type": "sft", "sampling": {"source": {"name": "Qwen/Qwen3-4B", "base_url": "http://localhost:8001/v1"}}}),
    (["--algo.type", "echo", "--algo.roles.user.alpha", "0.05"], {"type": "echo", "roles": {"user": {"alpha": 0.05}}}),
    (["--algo.type", "opsd", "--algo.demo_key", "answer"], {"type": "opsd", "demo_key": "answer"}),
])
def test_the_new_algorithms_read_back_as_exported(tmp_path, monkeypatch, args, algo):
    from rl_backend.config import load_rl_config

    out = tmp_path / "back.prime-rl.toml"
    code, text = _export(monkeypatch, "--target", "prime-rl", "-o", str(out), *args)
    assert code == 0, text
    back = load_rl_config(out)
    assert back.algo.model_dump(mode="json", exclude_none=True) == algo
