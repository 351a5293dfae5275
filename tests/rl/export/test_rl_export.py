"""`prime rl export` (prime-rl, Tinker, SkyRL) and `prime rl run --backend prime-rl`.

Golden files (tests/golden/export/) are the exports of the shipped configs; rewrite them with
``PRIMEKIT_UPDATE_GOLDEN=1`` after a deliberate change and read the diff. The round trips read the
written text back (TOML, or the command's ``key=value`` words) and check every carried value.
prime-rl's own config loader checks the files when ``prime_rl.configs`` is importable, here or in
the interpreter named by ``PRIME_RL_PYTHON`` (docs/cluster.md: how to make one).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from support import REPO, TESTS, with_pythonpath
from support.cli import prime
from support.prime_rl import prime_rl_python
from typer.testing import CliRunner

from primekit_cli.app import app
from rl_backend.config import load_rl_config
from rl_backend.export import TARGETS, export_config
from rl_backend.export.common import covered, leaf_paths

GOLDEN = TESTS / "golden" / "export"
SHIPPED = [("digit-sums", "prime-rl"), ("digit-sums-vf", "tinker"), ("digit-sums-vf", "skyrl")]
needs_verifiers = pytest.mark.skipif(
    __import__("importlib.util").util.find_spec("verifiers") is None,
    reason="needs the verifiers extra: pip install 'primekit[verifiers]'",
)


@pytest.fixture
def in_repo(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shipped configs name environments in ./environments/, as a user runs them from the repo root."""
    monkeypatch.chdir(REPO)
    return REPO


def _config(tmp_path: Path, text: str, name: str = "c.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@needs_verifiers
@pytest.mark.parametrize(("config", "target"), SHIPPED)
def test_shipped_configs_match_golden_files(in_repo: Path, config: str, target: str) -> None:
    result = export_config(load_rl_config(REPO / "configs" / "rl" / f"{config}.toml"), target)
    golden = GOLDEN / f"{config}{result.suffix}"
    if os.environ.get("PRIMEKIT_UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(result.text)
    assert result.text == golden.read_text()


def test_every_config_key_has_one_disposition_per_target() -> None:
    """A key added to RLConfig must be classified for every target (carried, local-only, refused, noted)."""
    for name, module in TARGETS.items():
        tables = [module.MAPPING, module.LOCAL_ONLY, module.NO_MEANING, module.NOTED]
        unclassified = [path for path in leaf_paths() if sum(covered(path, table) for table in tables) != 1]
        assert unclassified == [], (
            f"{name}: classify these keys in rl_backend/export/{module.__name__.rsplit('.', 1)[1]}.py"
        )


def test_the_cluster_docs_mapping_table_and_help_name_the_pinned_versions() -> None:
    from primekit_cli.commands.rl_cmd import EXPORT_VERSIONS

    readme = (REPO / "docs" / "cluster.md").read_text()
    for key in TARGETS["prime-rl"].MAPPING:
        assert f"| `{key}` |" in readme, f"docs/cluster.md's prime-rl mapping table lacks {key}"
    assert EXPORT_VERSIONS["prime-rl"] == TARGETS["prime-rl"].VERSION
    assert EXPORT_VERSIONS["tinker"] == TARGETS["tinker"].VERSION
    assert EXPORT_VERSIONS["skyrl"].split()[-1] == TARGETS["skyrl"].COMMIT[:8]
    assert TARGETS["prime-rl"].VERSION in readme


def test_builtin_environment_and_embedded_model_are_refused_in_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["rl", "export", str(REPO / "configs" / "rl" / "reverse-text.toml"), "--target", "prime-rl"]
    )
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1
    assert "'reverse-text': primekit's built-in environment" in lines[0]
    assert "verifiers' reverse-text, is a different environment" in lines[0]
    assert "model 'local/smollm2-135m'" in lines[0] and "HuggingFaceTB/SmolLM2-135M-Instruct" in lines[0]
    assert "Traceback" not in result.output


@needs_verifiers
def test_knobs_without_meaning_are_refused_each_named(in_repo: Path) -> None:
    args = ["rl", "export", "configs/rl/digit-sums.toml", "--target", "prime-rl", "--sampling.top_p", "0.9",
            "--trainer.loss.type", "grpo", "--trainer.advantage.std_normalize", "true", "--sampling.temperature", "2.5",
            "--model", "local/smollm2-135m"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    for named in (
        "sampling.top_p = 0.9",
        "trainer.loss.type = 'grpo' cannot carry",
        "trainer.advantage.std_normalize = True",
        "sampling.temperature = 2.5",
        "local/smollm2-135m",
    ):
        assert named in result.output


@needs_verifiers
def test_targets_refuse_what_their_recipes_cannot_take(in_repo: Path) -> None:
    v1 = export_refusal("configs/rl/digit-sums.toml", "tinker")
    assert "'digit-sums' is a verifiers v1 taskset; tinker loads a legacy verifiers environment only" in v1
    several = export_refusal("configs/rl/digit-sums-vf.toml", "tinker", "--buffer.env_ratios", "[1, 1]",
                             "--env", '[{id = "digit-sums-vf"}, {id = "digit-sums-vf", name = "b"}]')
    assert "2 [[env]] tables: the verifiers_rl recipe trains one environment" in several
    args = export_refusal(
        "configs/rl/digit-sums-vf.toml",
        "skyrl",
        "--env",
        '[{id = "digit-sums-vf", args = {seed = 3}}]',
        "--trainer.lora.alpha",
        "7.5",
    )
    assert (
        "env.args = [{'seed': 3}] has no skyrl equivalent" in args and "alpha = 7.5: SkyRL takes a whole number" in args
    )
    legacy = export_refusal("configs/rl/digit-sums-vf.toml", "prime-rl")
    assert (
        "'digit-sums-vf' is a legacy verifiers environment (load_environment); "
        "prime-rl loads a verifiers v1 taskset only"
        in legacy
    )
    native = export_refusal("configs/rl/digit-sums.toml", "prime-rl", "--env", '[{id = "vowel-count"}]')
    assert "'vowel-count' is a primekit environment" in native
    pooled = export_refusal("configs/rl/digit-sums.toml", "prime-rl", "--env",
                            '[{id = "digit-sums"}, {id = "digit-sums", name = "b"}]')
    assert "set buffer.env_ratios" in pooled


def export_refusal(config: str, target: str, *overrides: str) -> str:
    result = CliRunner().invoke(app, ["rl", "export", config, "--target", target, *overrides])
    assert result.exit_code == 2, result.output
    return next(line for line in result.output.splitlines() if line.startswith("error:"))


ROUND_TRIP = """
model = "Org/Model-X"
run_name = "try7"
max_steps = 7
batch_size = 12
rollouts_per_example = 3
max_concurrent = 64
[sampling]
max_tokens = 40
temperature = 0.7
[[env]]
id = "{first}"
args = {{ num_tasks = 50, seed = 4 }}
[[env]]
id = "{second}"
name = "second"
[buffer]
env_ratios = [0.6, 0.4]
[trainer]
lr = 3e-5
weight_decay = 0.05
warmup_steps = 2
max_grad_norm = 0.5
max_seq_len = 1024
on_policy = true
[trainer.lora]
rank = 8
alpha = 24
dropout = 0.1
target_modules = ["q_proj", "v_proj"]
[ckpt]
interval = 3
keep_last = 4
[eval]
interval = 5
num_examples = 9
rollouts_per_example = 2
temperature = 0.0
at_start = true
[filter]
enabled = false
[wandb]
project = "p"
entity = "e"
"""


@needs_verifiers
def test_prime_rl_round_trip_carries_every_value(tmp_path: Path) -> None:
    folder = REPO / "environments" / "digit_sums"
    config = load_rl_config(_config(tmp_path, ROUND_TRIP.format(first=folder, second=folder)))
    data = tomllib.loads(export_config(config, "prime-rl").text)
    orch, trainer = data["orchestrator"], data["trainer"]
    assert data["model"] == {"name": "Org/Model-X"} and data["run"] == {"name": "try7"}
    assert (data["max_steps"], data["seq_len"], orch["batch_size"], orch["group_size"]) == (7, 1024, 12, 3)
    assert orch["concurrency"] == {"max_inflight": 64} and orch["max_off_policy_steps"] == 0
    assert orch["train"]["sampling"] == {"temperature": 0.7, "max_completion_tokens": 40}
    assert orch["train"]["filter_zero_advantages"] is False
    sources = orch["train"]["source"]
    assert [s["name"] for s in sources] == ["digit_sums", "second"] and [s["ratio"] for s in sources] == [0.6, 0.4]
    assert sources[0]["env"]["taskset"] == {"id": "digit-sums", "num_tasks": 50, "seed": 4}
    assert sources[1]["env"]["taskset"] == {"id": "digit-sums"}
    assert all("curriculum" not in s for s in sources)
    assert trainer["optim"] == {
        "type": "adamw",
        "lr": 3e-5,
        "weight_decay": 0.05,
        "max_norm": 0.5,
        "betas1": 0.9,
        "betas2": 0.999,
    }
    assert trainer["scheduler"] == {"type": "linear", "warmup_steps": 2, "decay_steps": 0}
    assert trainer["model"]["lora"] == {
        "rank": 8,
        "alpha": 24.0,
        "dropout": 0.1,
        "target_modules": ["q_proj", "v_proj"],
    }
    assert trainer["loss"]["kl_tau"] == 0.0
    assert data["ckpt"] == {"interval": 3, "keep_last": 4}
    assert {k: orch["eval"][k] for k in ("interval", "num_examples", "group_size", "skip_first_step")} == {
        "interval": 5, "num_examples": 9, "group_size": 2, "skip_first_step": False}
    assert orch["eval"]["sampling"]["temperature"] == 0.0
    assert data["monitors"]["wandb"] == {"project": "p", "entity": "e"}


@needs_verifiers
def test_tinker_and_skyrl_round_trips_carry_every_value(tmp_path: Path) -> None:
    folder = REPO / "environments" / "digit_sums_vf"
    text = ROUND_TRIP.format(first=folder, second=folder).replace("[buffer]\nenv_ratios = [0.6, 0.4]\n", "")
    one_env = text[: text.index("[[env]]", text.index("[[env]]") + 1)] + text[text.index("[trainer]"):]
    one_env = one_env.replace("alpha = 24\ndropout = 0.1\ntarget_modules", "alpha = 32\ntarget_modules")
    one_env = one_env.replace('target_modules = ["q_proj", "v_proj"]\n', "").replace(
        "weight_decay = 0.05\nwarmup_steps = 2\n", ""
    )
    one_env = one_env.replace("max_grad_norm = 0.5\n", "").replace('entity = "e"\n', "")
    config = load_rl_config(_config(tmp_path, one_env))
    tinker = dict(word.split("=", 1) for word in export_config(config, "tinker").command[3:])
    assert (
        tinker["model_name"] == "Org/Model-X" and tinker["lora_rank"] == "8" and tinker["vf_env_id"] == "digit-sums-vf"
    )
    assert json.loads(tinker["vf_env_args"]) == {"num_tasks": 50, "seed": 4}
    assert (tinker["group_size"], tinker["groups_per_batch"], tinker["max_tokens"], tinker["max_steps"]) == (
        "3",
        "4",
        "40",
        "7",
    )
    assert float(tinker["learning_rate"]) == 3e-5 and tinker["temperature"] == "0.7" and tinker["wandb_name"] == "try7"
    assert (tinker["save_every"], tinker["eval_every"], tinker["wandb_project"]) == ("3", "5", "p")

    no_args = load_rl_config(_config(tmp_path, one_env.replace("args = { num_tasks = 50, seed = 4 }\n", ""), "s.toml"))
    skyrl_command = export_config(no_args, "skyrl").command
    overrides = dict(word.split("=", 1) for word in skyrl_command[skyrl_command.index("-m", 10) + 2:])
    assert (
        overrides["trainer.policy.model.path"] == "Org/Model-X"
        and overrides["environment.env_class"] == "digit-sums-vf"
    )
    assert (overrides["trainer.policy.model.lora.rank"], overrides["trainer.policy.model.lora.alpha"]) == ("8", "32")
    assert overrides["generator.n_samples_per_prompt"] == "3" and overrides["trainer.train_batch_size"] == "4"
    assert (
        overrides["generator.sampling_params.max_generate_length"] == "40"
        and overrides["trainer.max_training_steps"] == "7"
    )
    assert float(overrides["trainer.policy.optimizer_config.lr"]) == 3e-5
    assert (
        overrides["trainer.policy.optimizer_config.weight_decay"] == "0.0"
        and overrides["trainer.algorithm.use_kl_loss"] == "false"
    )
    assert (
        overrides["trainer.algorithm.grpo_norm_by_std"] == "false"
        and "trainer.algorithm.dynamic_sampling.type" not in overrides
    )
    assert overrides["trainer.max_prompt_length"] == str(1024 - 40) and overrides["trainer.eval_before_train"] == "true"
    assert skyrl_command[skyrl_command.index("--env_id") + 1] == "digit-sums-vf"


VALIDATE = """
import json, sys
from pydantic_config import cli
from prime_rl.configs.rl import RLConfig
c = cli(RLConfig, args=["@", sys.argv[1]])
o, t = c.orchestrator, c.trainer
print(json.dumps({
    "model": t.model.name, "orch_model": o.model.name, "max_steps": [t.max_steps, o.max_steps],
    "seq_len": [t.model.seq_len, o.seq_len], "batch_size": o.batch_size,
    "group_size": [s.group_size for s in o.train.source], "ratios": [s.ratio for s in o.train.source],
    "tasksets": [
        s.env.taskset.model_dump(include={"id", "num_tasks", "seed", "system_prompt"}, mode="json")
        for s in o.train.source
    ],
    "names": [s.name for s in o.train.source], "max_tokens": [s.sampling.max_completion_tokens for s in o.train.source],
    "temperature": [s.sampling.temperature for s in o.train.source], "lr": t.optim.lr,
    "weight_decay": t.optim.weight_decay,
    "lora": None if t.model.lora is None else [t.model.lora.rank, t.model.lora.alpha, o.model.lora.rank],
    "off_policy": o.max_off_policy_steps, "kl_tau": t.loss.kl_tau, "renderer": o.renderer.name,
    "eval": None if o.eval is None else [o.eval.interval, [s.num_examples for s in o.eval.source]],
    "ckpt": [c.ckpt.interval, c.ckpt.keep_last], "scheduler": t.scheduler.type, "output_dir": str(c.output_dir),
}))
"""


@needs_verifiers
@pytest.mark.parametrize("variant", ["golden", "several"])
def test_prime_rls_own_loader_accepts_the_export(tmp_path: Path, in_repo: Path, variant: str) -> None:
    python = prime_rl_python()
    if python is None:
        pytest.skip("prime-rl's config package is not importable (set PRIME_RL_PYTHON; docs/cluster.md)")
    if variant == "golden":
        file = GOLDEN / "digit-sums.prime-rl.toml"
        expect = {
            "model": "HuggingFaceTB/SmolLM2-135M-Instruct",
            "max_steps": [20, 20],
            "batch_size": 32,
            "group_size": [8],
            "lora": [16, 32.0, 16],
            "lr": 2e-4,
            "weight_decay": 0.0,
            "off_policy": 1,
            "max_tokens": [32],
            "tasksets": [{"id": "digit-sums", "num_tasks": 500, "seed": 0, "system_prompt": None}],
            "eval": [10, [32]],
            "ckpt": [10, 2],
            "kl_tau": 0.0,
            "renderer": "default",
            "scheduler": "constant",
        }
    else:
        args = [
            "rl",
            "run",
            "configs/rl/digit-sums.toml",
            "--backend",
            "prime-rl",
            "--skip-baseline",
            "--dry-run",
            "-o",
            str(tmp_path / "out"),
            "--env",
            '[{id = "digit-sums", args = {seed = 1}}, {id = "digit-sums", name = "b"}]',
            "--buffer.env_ratios",
            "[3, 1]",
            "--trainer.lora",
            "false",
            "--trainer.warmup_steps",
            "5",
            "--trainer.on_policy",
            "true",
            "--eval.interval",
            "0",
            "--system-prompt",
            "Add.",
            "--max-steps",
            "9",
        ]
        out = CliRunner().invoke(app, args).stdout
        text = out[out.index("# prime-rl v"):]
        file = tmp_path / "several.toml"
        file.write_text(text)
        expect = {
            "max_steps": [9, 9],
            "ratios": [3.0, 1.0],
            "names": ["digit-sums", "b"],
            "lora": None,
            "off_policy": 0,
            "eval": None,
            "scheduler": "linear",
            "group_size": [8, 8],
        }
    result = subprocess.run(
        [python, "-c", VALIDATE, str(file)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        env=with_pythonpath(REPO / "environments" / "digit_sums"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    resolved = json.loads(result.stdout.strip().splitlines()[-1])
    for key, value in expect.items():
        assert resolved[key] == value, key
    if variant == "several":
        assert resolved["tasksets"][0]["system_prompt"].endswith("prime-rl.system_prompt.txt")
        assert resolved["output_dir"].startswith(str(tmp_path / "out" / "rl"))


FAKE_RL = """#!{python}
import json, os, sys
with open(os.environ["FAKE_RL_RECORD"], "w") as handle:
    json.dump({{"argv": sys.argv[1:]}}, handle)
print("fake prime-rl: step 1/20", flush=True)
sys.exit(int(os.environ.get("FAKE_RL_EXIT", "0")))
"""


@pytest.fixture
def fake_rl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake prime-rl `rl` on PATH: a real executable that records its arguments and exits with FAKE_RL_EXIT."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "rl"
    script.write_text(FAKE_RL.format(python=sys.executable))
    script.chmod(0o755)
    monkeypatch.setenv("FAKE_RL_RECORD", str(tmp_path / "argv.json"))
    return bin_dir


def _prime(args: list[str], monkeypatch: pytest.MonkeyPatch, path: str, exit_code: str = "0") -> tuple[int, str]:
    """`prime ARGS` in this process (prime-rl itself runs as a real child process); (exit code, stderr+stdout)."""
    monkeypatch.setenv("PATH", path)
    monkeypatch.setenv("FAKE_RL_EXIT", exit_code)
    result = prime(*args)
    return result.exit_code, result.output


@needs_verifiers
def test_backend_prime_rl_launches_rl_and_passes_its_exit_code_through(
    tmp_path: Path, in_repo: Path, fake_rl: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code, output = _prime(
        ["rl", "run", "configs/rl/digit-sums.toml", "--backend", "prime-rl", "--skip-baseline", "-o", str(out)],
        monkeypatch,
        f"{fake_rl}{os.pathsep}{os.environ['PATH']}",
        exit_code="3",
    )
    assert code == 3, output
    assert "fake prime-rl: step 1/20" in capfd.readouterr().out  # the child writes to this terminal
    (run_dir,) = (out / "rl").iterdir()
    config_path = run_dir / "prime-rl.toml"
    assert json.loads((tmp_path / "argv.json").read_text()) == {"argv": ["@", str(config_path)]}
    launch = json.loads((run_dir / "launch.json").read_text())
    assert launch["command"] == [str(fake_rl / "rl"), "@", str(config_path)] and launch["exit_code"] == 3
    assert launch["config"] == str(config_path) and launch["started_at"] <= launch["finished_at"]
    written = tomllib.loads(config_path.read_text())
    assert written["output_dir"] == str(run_dir) and written["run"] == {"name": "prime-rl"}
    assert (run_dir / "config.resolved.toml").is_file()


@needs_verifiers
def test_prime_rl_cmd_is_split_like_a_shell_and_without_prime_rl_the_config_is_still_written(
    tmp_path: Path, in_repo: Path, fake_rl: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(fake_rl / 'rl'))}"
    code, output = _prime(["rl", "run", "configs/rl/digit-sums.toml", "--backend", "prime-rl", "--skip-baseline",
                           "-o", str(tmp_path / "a"), "--prime-rl-cmd", command], monkeypatch, os.environ["PATH"])
    assert code == 0, output
    assert json.loads((tmp_path / "argv.json").read_text())["argv"][0] == "@"

    empty = tmp_path / "empty"
    empty.mkdir()
    code, output = _prime(["rl", "run", "configs/rl/digit-sums.toml", "--backend", "prime-rl", "--skip-baseline",
                           "-o", str(tmp_path / "b")], monkeypatch, str(empty))
    assert code == 2
    (line,) = [line for line in output.splitlines() if line.startswith("error:")]
    (run_dir,) = (tmp_path / "b" / "rl").iterdir()
    assert (
        "prime-rl is not installed here" in line and str(run_dir / "prime-rl.toml") in line and "--prime-rl-cmd" in line
    )
    assert (run_dir / "prime-rl.toml").is_file() and not (run_dir / "launch.json").exists()


@needs_verifiers
def test_backend_prime_rl_dry_run_shows_checks_file_and_command(tmp_path: Path, in_repo: Path) -> None:
    result = CliRunner().invoke(app, ["rl", "run", "configs/rl/digit-sums.toml", "--backend", "prime-rl", "--dry-run",
                                      "-o", str(tmp_path), "--prime-rl-cmd", "uv run --project /opt/prime-rl rl"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert (
        "baseline     16 examples x 8 (reward in [0.01, 0.8], diverse groups >= 10%), here, before prime-rl starts"
        in out
    )
    run_dir = Path(out.split("run dir      ")[1].split()[0])
    assert f"command      uv run --project /opt/prime-rl rl @ {run_dir / 'prime-rl.toml'}" in out
    assert "[[orchestrator.train.source]]" in out and "# prime-rl v0.8.1.dev67" in out
    assert not (tmp_path / "rl").exists()  # a dry run writes nothing


@needs_verifiers
def test_baseline_runs_before_prime_rl_and_a_refusal_stops_the_launch(
    tmp_path: Path, in_repo: Path, fake_rl: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checks are primekit's own, through a real HTTP model (the scripted solver, which answers every sum right)."""
    from support.solver_server import SolverServer

    server = SolverServer()
    try:
        base = [
            "rl",
            "run",
            "configs/rl/digit-sums.toml",
            "--backend",
            "prime-rl",
            "--model",
            "Org/Model",
            "--inference.base_url",
            server.base_url,
            "--baseline.num_examples",
            "2",
            "--baseline.rollouts_per_example",
            "2",
        ]
        path = f"{fake_rl}{os.pathsep}{os.environ['PATH']}"
        code, output = _prime([*base, "-o", str(tmp_path / "a")], monkeypatch, path)
        assert code == 2
        assert "baseline check failed: mean reward 100.0%" in output and "above baseline.max_reward" in output
        assert not (tmp_path / "argv.json").exists()
        code, output = _prime(
            [*base, "-o", str(tmp_path / "b"), "--baseline.max_reward", "1", "--baseline.min_diverse_groups", "0"],
            monkeypatch,
            path,
        )
        assert code == 0, output
    finally:
        server.stop()
    (run_dir,) = (tmp_path / "b" / "rl").iterdir()
    assert json.loads((run_dir / "baseline.json").read_text())["mean_reward"] == 1.0
    assert (run_dir / "baseline" / "results.jsonl").is_file()
    assert (tmp_path / "argv.json").is_file()


@needs_verifiers
def test_the_printed_skyrl_command_pastes_into_bash(tmp_path: Path, in_repo: Path) -> None:
    """The line printed after ``-o``: the dataset step ``&&`` the trainer, with ``&&`` an operator, not a word."""
    result = CliRunner().invoke(app, ["rl", "export", "configs/rl/digit-sums-vf.toml", "--target", "skyrl",
                                      "-o", str(tmp_path / "run.skyrl.sh")])
    assert result.exit_code == 0, result.output
    line = result.stdout.strip().splitlines()[-1]
    assert " && " in line and "'&&'" not in line
    words = shlex.split(line)
    assert words.count("&&") == 1 and words[words.index("&&") + 1:] == export_config(
        load_rl_config(REPO / "configs/rl/digit-sums-vf.toml"), "skyrl").command[words.index("&&") + 1:]
    assert subprocess.run(["bash", "-n", "-c", line]).returncode == 0
