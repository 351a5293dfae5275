"""`prime gepa run` against its anchor, verifiers 0.3.1's GEPA script (what `prime gepa run` runs there):
its flags, its files' schema, its output location, plus the budget preflight.

The flag list and the file schemas are data copied once from the anchor's source
(``verifiers/legacy/scripts/gepa.py`` ``main()``'s argparse; ``verifiers/legacy/gepa/gepa_utils.py``
``save_gepa_results``), so this test reads nothing installed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import typer
from support import REPO
from support.gepa_job import gepa_run
from support.scripted_client import ScriptedClient
from typer.testing import CliRunner

from evalkit.core import runs
from gepa_cli import runner as runner_module
from gepa_cli.config import GepaJobConfig
from primekit_cli.app import app
from primekit_cli.commands.gepa_cmd import EXAMPLES
from primekit_cli.compat_flags import GEPA_REFUSED

GEPA_FLAGS: list[tuple[str, ...]] = [
    # verifiers 0.3.1 legacy/scripts/gepa.py, in its order
    ("--env-args", "-a"), ("--env-dir-path", "-p"), ("--extra-env-kwargs", "-x"), ("--model", "-m"),
    ("--reflection-model", "-M"), ("--endpoints-path", "-e"), ("--api-key-var", "-k"), ("--api-base-url", "-b"),
    ("--max-calls", "-B"), ("--minibatch-size",), ("--perfect-score",), ("--state-columns",), ("--num-train", "-n"),
    ("--num-val", "-N"), ("--max-concurrent", "-c"), ("--sampling-args", "-S"), ("--seed",), ("--verbose", "-v"),
    ("--run-dir", "-o"), ("--no-save",), ("--tui", "-u"),
]

T_STR, T_INT, T_FLOAT, T_BOOL, T_DICT, T_LIST = (str,), (int,), (float, int), (bool,), (dict,), (list,)
T_OPT_FLOAT = (float, int, type(None))
COMPAT_RESULTS_ROW = {"example_id": T_INT, "reward": T_FLOAT, "score": T_OPT_FLOAT, "info": T_DICT}
COMPAT_RESULTS_INFO = {
    "schema_version": T_STR, "eval_kind": T_STR, "sample_type": T_STR, "optimization_target": T_STR,
    "candidate_idx": T_INT, "is_best": T_BOOL, "system_prompt": T_STR, "system_prompt_sha256": T_STR,
    "diff_from_initial": T_STR, "parent_candidate_idxs": T_LIST, "val_subscores": T_DICT, "num_val_examples": T_INT,
    "discovery_metric_calls": T_INT,
}
COMPAT_FRONTIER_ROW = {
    "schema_version": T_STR,
    "valset_row": T_INT,
    "best_score": T_FLOAT,
    "num_best_candidates": T_INT,
    "best_candidates": T_LIST,
}
COMPAT_FRONTIER_ENTRY = {"candidate_idx": T_INT, "system_prompt_sha256": T_STR, "score": T_FLOAT}
COMPAT_METADATA = {
    "schema_version": T_STR, "eval_kind": T_STR, "framework": T_STR, "optimizer": T_STR, "optimization_target": T_STR,
    "env_id": T_STR, "model": T_STR, "reflection_model": T_STR, "num_candidates": T_INT, "best_idx": T_INT,
    "best_score": T_OPT_FLOAT, "total_metric_calls": T_INT, "initial_prompt_sha256": T_STR, "best_prompt_sha256": T_STR,
    "system_prompt_path": T_STR, "results_path": T_STR, "completed_at": T_STR, "config": T_DICT,
}
COMPAT_METADATA_CONFIG = {
    "env_id": T_STR, "envs": T_LIST, "env_args": T_DICT, "model": T_STR, "reflection_model": T_STR, "num_train": T_INT,
    "num_val": T_INT, "max_metric_calls": T_INT, "minibatch_size": T_INT, "perfect_score": T_OPT_FLOAT,
    "state_columns": T_LIST, "seed": T_INT,
}
COMPAT_CONSTANTS = {"schema_version": "verifiers.gepa.v1", "eval_kind": "gepa", "optimization_target": "system_prompt"}

cli = CliRunner()


def wrong_types(record: dict, schema: dict) -> dict:
    return {
        key: record.get(key, "<missing>") for key, types in schema.items() if not isinstance(record.get(key), types)
    }


def gepa_options() -> set[str]:
    command = typer.main.get_command(app).commands["gepa"].commands["run"]  # type: ignore[attr-defined]
    return {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}


def test_every_anchor_flag_is_implemented_or_refused():
    refused = {flag for r in GEPA_REFUSED for flag in r.flags}
    options = gepa_options()
    assert [flag for flags in GEPA_FLAGS for flag in flags if flag not in options and flag not in refused] == []
    for flag in sorted(refused):
        code, output = gepa_run("arithmetic", flag)
        assert code == 2 and output.startswith(f"error: {flag} is not supported: ") and "No such option" not in output


def fake_clients(teacher_reply="```\nSay 42.\n```", seen: list | None = None):
    def factory(config: GepaJobConfig):
        if seen is not None:
            seen.append(config)
        return ScriptedClient(lambda m, s, t: "42"), ScriptedClient(lambda m, s, t: teacher_reply, model="teacher")

    return factory


def test_state_columns_space_separated(tmp_path, monkeypatch):
    seen: list[GepaJobConfig] = []
    monkeypatch.setattr(runner_module, "open_clients", fake_clients(seen=seen))
    code, output = gepa_run("arithmetic", "--state-columns", "a", "b", "-B", "14", "-n", "4", "-N", "4", "-o",
                            str(tmp_path / "r"))
    assert code == 0, output
    assert seen[0].state_columns == ["a", "b"]
    meta = json.loads((tmp_path / "r" / "metadata.json").read_text())
    assert meta["config"]["state_columns"] == ["a", "b"]
    code, output = gepa_run("arithmetic", "-B", "14", "-n", "4", "-N", "4", "--state-columns", "a,b", "c", "-o",
                            str(tmp_path / "s"))
    assert code == 0 and seen[1].state_columns == ["a", "b", "c"]  # the old comma form still works


def reverser(messages, sampling, tools):
    """Reverses the question only when its system prompt says REVERSE (which the teacher adds)."""
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    return messages[-1]["content"][::-1] if "REVERSE" in system else "no"


def test_files_follow_the_anchor_schema(tmp_path, monkeypatch):
    def factory(config):
        return ScriptedClient(reverser), ScriptedClient(lambda m, s, t: "```\nREVERSE the text.\n```", model="teacher")

    monkeypatch.setattr(runner_module, "open_clients", factory)
    code, output = gepa_run("reverse-text", "-B", "30", "-n", "6", "-N", "4", "-o", str(tmp_path / "r"))
    assert code == 0, output
    run_dir = tmp_path / "r"
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert (
        len(rows) >= 2 and rows[-1]["score"] == 1.0 and rows[-1]["info"]["is_best"]
    )  # the seed and the accepted child
    for row in rows:
        assert wrong_types(row, COMPAT_RESULTS_ROW) == {} and wrong_types(row["info"], COMPAT_RESULTS_INFO) == {}
        assert {k: row["info"][k] for k in ("schema_version", "eval_kind", "optimization_target")} == COMPAT_CONSTANTS
        assert row["example_id"] == row["info"]["candidate_idx"] and row["reward"] == row["score"]
        assert isinstance(row["info"]["discovered_at_calls"], int)  # primekit's budget count, beside theirs
    frontier = [json.loads(line) for line in (run_dir / "pareto_frontier.jsonl").read_text().splitlines()]
    assert len(frontier) == 4
    for row in frontier:
        assert wrong_types(row, COMPAT_FRONTIER_ROW) == {}
        assert all(wrong_types(entry, COMPAT_FRONTIER_ENTRY) == {} for entry in row["best_candidates"])
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert wrong_types(meta, COMPAT_METADATA) == {} and wrong_types(meta["config"], COMPAT_METADATA_CONFIG) == {}
    assert {k: meta[k] for k in COMPAT_CONSTANTS} == COMPAT_CONSTANTS and meta["env_id"] == "reverse-text"
    assert meta["config"]["max_metric_calls"] == 30 and meta["config"]["envs"][0]["env_id"] == "reverse-text"
    assert meta["best_score"] == 1.0 and meta["best_idx"] == len(rows) - 1
    assert (run_dir / meta["system_prompt_path"]).read_text() == rows[meta["best_idx"]]["info"]["system_prompt"]
    assert meta["total_metric_calls"] <= 30 and meta["budget"] == 30 and "num_reflection_calls" in meta  # ours, beside


def test_preflight_line_dry_run_and_refusal(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, output = gepa_run("arithmetic", "-B", "60", "-n", "12", "-N", "8", "--dry-run")
    assert code == 0, output
    assert "budget 60 buys about 3-7 proposals (seed validation 8, each proposal 2x3 + 8 on acceptance)" in output
    assert "task model: local/smollm2-135m (local)" in output and "env arithmetic: train 12, val 8" in output
    assert not (tmp_path / "outputs").exists()  # a dry run writes nothing
    code, output = gepa_run("arithmetic", "-B", "40", "-n", "12", "-N", "8", "--dry-run")
    assert code == 0 and "pays for only 2 accepted proposal(s)" in output
    code, output = gepa_run("arithmetic", "-B", "50", "-N", "100")
    assert code == 2
    assert output.startswith(
        "error: budget 50 buys no proposal (seed validation 100, each proposal 2x3 + 100 on acceptance): "
        "raise -B/--max-calls to at least 206, or lower -N/--num-val (100 validation examples) or --minibatch-size"
    )
    assert not (tmp_path / "outputs").exists()


def test_preflight_is_printed_before_any_model_call(tmp_path, monkeypatch):
    printed: list[str] = []

    def factory(config):
        printed.append("clients opened")
        return fake_clients()(config)

    monkeypatch.setattr(runner_module, "open_clients", factory)
    result = cli.invoke(app, ["gepa", "run", "arithmetic", "-B", "20", "-n", "4", "-N", "4", "-o", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert result.output.index("budget 20 buys about 1-2 proposals") < result.output.index("gepa: arithmetic")
    assert printed == ["clients opened"]


def local_env(tmp_path: Path) -> None:
    shutil.copytree(REPO / "environments" / "vowel_count", tmp_path / "environments" / "vowel_count")


def test_local_environment_runs_go_to_its_outputs_folder(tmp_path, monkeypatch):
    local_env(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(runner_module, "open_clients", fake_clients())
    code, output = gepa_run("vowel-count", "-B", "14", "-n", "4", "-N", "4")
    assert code == 0, output
    (run_dir,) = (
        tmp_path / "environments" / "vowel_count" / "outputs" / "gepa" / "vowel-count--local--smollm2-135m"
    ).iterdir()
    assert (run_dir / "metadata.json").is_file() and not (tmp_path / "outputs").exists()
    code, output = gepa_run("vowel-count", "--resume")  # a bare --resume looks in the same place
    assert code == 0 and "resuming" in output
    code, output = gepa_run("vowel-count", "-B", "14", "-n", "4", "-N", "4", "-o", str(tmp_path / "mine"))
    assert code == 0 and (tmp_path / "mine" / "metadata.json").is_file()  # -o overrides
    code, output = gepa_run("arithmetic", "-B", "14", "-n", "4", "-N", "4")  # a built-in keeps ./outputs
    assert code == 0 and list((tmp_path / "outputs" / "gepa").glob("arithmetic--*/*"))


def test_help_example_names_the_run_folder_as_the_code_does():
    folder = runs.run_slug("arithmetic", "local/smollm2-135m")
    assert folder == "arithmetic--local--smollm2-135m" and f"outputs/gepa/{folder}/" in EXAMPLES
    assert "local-smollm2" not in EXAMPLES.replace("local--smollm2", "")


def test_gepa_toml_accepts_anchor_keys(tmp_path):
    from gepa_cli.config import build_job_config, load_gepa_toml, toml_to_job_fields

    file = tmp_path / "g.toml"
    file.write_text(
        'model = "m"\napi_base_url = "http://127.0.0.1:9/v1"\nenv_dir_path = "envs"\nrun_dir = "runs/one"\n'
        '[[env]]\nid = "arithmetic"\nextra_env_kwargs = {system_prompt = "x"}\n'
        '[[env]]\nid = "reverse-text"\n[gepa]\nperfect_score = 1.0\nstop_at_score = 0.9\n'
    )
    parsed, base = load_gepa_toml(file)
    config = build_job_config(toml_to_job_fields(parsed, base), str(file))
    assert config.base_url == "http://127.0.0.1:9/v1" and config.env_dir_path == str(tmp_path / "envs")
    assert config.run_dir == str(tmp_path / "runs" / "one") and config.envs[0].extra_env_kwargs == {
        "system_prompt": "x"
    }
    assert (config.perfect_score, config.stop_at_score) == (1.0, 0.9)
    assert config.runs_root == Path(
        "outputs"
    )  # several environments: ./outputs, as verifiers' label "a+b" has no folder


def test_runs_written_before_the_schema_change_still_resume(tmp_path, monkeypatch):
    monkeypatch.setattr(runner_module, "open_clients", fake_clients())
    run_dir = tmp_path / "r"
    assert gepa_run("arithmetic", "-B", "14", "-n", "4", "-N", "4", "-o", str(run_dir))[0] == 0
    meta = json.loads((run_dir / "metadata.json").read_text())
    old = meta.pop("job_config")  # the earlier layout: our job config under "config", envs without extra_env_kwargs
    old["envs"] = [{"id": e["id"], "args": e["args"]} for e in old["envs"]]
    (run_dir / "metadata.json").write_text(json.dumps({**meta, "config": old}))
    code, output = gepa_run("--resume", str(run_dir))
    assert code == 0, output
    assert json.loads((run_dir / "metadata.json").read_text())["job_config"]["max_calls"] == 14
