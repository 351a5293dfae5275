"""Same rows as verifiers: environments shaped like real upstream ones, run by verifiers' own `vf-eval` and by
`prime eval run` against one deterministic model (tests/support/hash_server.py: the reply is a pure function of the
conversation), compared example by example (prompt, completion, reward, metrics).

Shapes (tests/verifiers_envs/, written for these tests after public environments): a plain-string `task`
column with `system_prompt=""` and rows from a sibling module (`vf_task_str`), a completion-mode environment
(`vf_completion`), an `EnvGroup` (`vf_envgroup`), and a v1 taskset package that imports itself by absolute
name (`vf_v1_pkg`), run through the path form.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip(
    "verifiers", reason="needs the verifiers extra: pip install 'primekit[verifiers]' (make test installs it)"
)

from support.hash_server import HashServer
from support.verifiers_parity import KEY_VAR, TOML, comparable, rows_of, run

PARITY_ENVS = ("vf_task_str", "vf_completion", "vf_envgroup")


@pytest.fixture(scope="module")
def server():
    started = HashServer()
    yield started
    started.stop()


@pytest.fixture
def project(verifiers_project: Path) -> Path:
    return verifiers_project


def config(project: Path, name: str, url: str, out: str, extra: str = "", url_key: str = "base_url") -> Path:
    evals = "".join(f'\n[[eval]]\nenv_id = "{env}"\n' for env in PARITY_ENVS)
    path = project / name
    path.write_text(TOML.format(url_key=url_key, url=url, key=KEY_VAR, out=project / out, extra=extra) + evals)
    return path


def test_legacy_shapes_give_the_rows_vf_eval_gives(project, server):
    """vf-eval (its default path: the env server) and prime eval run, same TOML shape, same model."""
    env_folders = [project / "environments" / env for env in PARITY_ENVS]
    vf_toml = config(project, "vf.toml", server.base_url, "vf-out", "save_results = true\ndisable_tui = true",
                     url_key="api_base_url")
    done = run(project, ["-c", "import sys; from verifiers.legacy.scripts.eval import main; sys.exit(main())",
                         str(vf_toml)], env_folders)
    assert done.returncode == 0, done.stderr[-3000:]
    pk_toml = config(project, "pk.toml", server.base_url, "pk-out")
    done = run(project, ["-m", "primekit_cli", "eval", "run", str(pk_toml)], [Path.cwd()])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr

    for env in PARITY_ENVS:
        theirs, ours = rows_of(project / "vf-out", env), rows_of(project / "pk-out", env)
        assert len(ours) == len(theirs) == 6, env
        assert all(r["error"] is None for r in ours), (env, [r["error"] for r in ours])
        assert comparable(ours) == comparable(theirs), env

    ours = rows_of(project / "pk-out", "vf_task_str")
    assert ours[0]["prompt"][0]["role"] == "user"  # system_prompt="" adds no empty system message
    assert {r["reward"] for r in ours} == {0.0, 1.0}  # the model is right on some rows: a real comparison
    completion = rows_of(project / "pk-out", "vf_completion")
    assert completion[0]["prompt"] == [{"role": "text", "content": completion[0]["prompt"][0]["content"]}]
    group = rows_of(project / "pk-out", "vf_envgroup")
    names = {frozenset(r["metrics"]) for r in group}  # each row only its own sub-environment's names
    assert names == {frozenset({"sum_correct", "format_reward_func", "num_turns"}), frozenset({"echoed", "num_turns"})}
    meta = json.loads(next((project / "pk-out").glob("evals/vf_envgroup*/*/metadata.json")).read_text())
    assert meta["pass_threshold"] == 0.5  # verifiers' own default, as vf-eval records it


def test_v1_package_with_absolute_self_imports_runs_through_the_path_form(project, server):
    done = run(project, ["-m", "primekit_cli", "eval", "run", "./environments/vf_v1_pkg", "-m", "hash-model",
                         "-b", server.base_url, "-k", KEY_VAR, "-n", "4", "-r", "1", "-o", "out"], [Path.cwd()])
    assert done.returncode == 0, done.stderr[-3000:]
    (results,) = (project / "out").glob("evals/*/*/results.jsonl")
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(rows) == 4 and all(r["error"] is None for r in rows)
    assert set(rows[0]["metrics"]) == {"repeated", "tagged_chars"}
    assert max(r["reward"] for r in rows) > 0  # scored by vf_v1_pkg.scoring, imported by absolute name
    assert rows[0]["prompt"][0] == {
        "role": "system",
        "content": "Repeat the word you are given inside <word></word> tags.",
    }


def test_the_path_form_imports_the_package_under_its_own_name(project, monkeypatch):
    """One module object, the one `import vf_v1_pkg` gives (what verifiers' own loader imports), not a copy."""
    from evalkit.loading.resolve import load_environment

    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))  # the loader extends it for child processes
    for name in ("vf_v1_pkg", "vf_v1_pkg.taskset", "vf_v1_pkg.scoring", "vf_task_str", "vf_task_str_rows"):
        monkeypatch.delitem(sys.modules, name, raising=False)  # put back (or dropped) when the test ends
    folder = project / "environments" / "vf_v1_pkg"
    env = load_environment(str(folder))
    import vf_v1_pkg  # noqa: F401 - the name the package imports itself by

    assert sys.modules["vf_v1_pkg"].__file__ == str(folder / "vf_v1_pkg" / "__init__.py")
    assert type(env.taskset) is sys.modules["vf_v1_pkg.taskset"].WordTaskset
    assert not [name for name in sys.modules if "primekit_local_env" in name]
    assert os.environ["PYTHONPATH"].split(os.pathsep)[0] == str(folder)  # tool servers it starts import it too
    assert len(env.get_dataset(n=2)) == 2

    legacy = load_environment(str(project / "environments" / "vf_task_str"))
    assert sys.modules["vf_task_str_rows"].__file__ == str(
        project / "environments" / "vf_task_str" / "vf_task_str_rows.py"
    )
    assert [r["prompt"][0]["role"] for r in legacy.get_eval_dataset(n=2)] == ["user", "user"]
