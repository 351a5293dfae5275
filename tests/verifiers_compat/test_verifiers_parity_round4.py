"""Same rows as verifiers, round 4: shapes from environments nobody here wrote, each in a tiny environment
(tests/verifiers_envs/), run by verifiers' own evaluator and by `prime eval run` against one deterministic model
(tests/support/hash_server.py), compared example by example (helpers in tests/support/verifiers_parity.py).

- `vf_task_id`: rows whose `info` carries a task payload with the task's own id (`"train-00003"`): verifiers
  writes that id (and the payload's answer and info); so does primekit, and the id keys the row everywhere
  (`--resume`, paired statistics against verifiers' own run dir, `prime data from-eval`'s provenance), while a
  run dir written before, keyed by index, still resumes by index.
- `vf_v1_newer`: a v1 taskset importing a module only verifiers 0.4 has: under 0.3.1 the error names that module
  and the installed version (verifiers is installed; "not installed" sent people to reinstall it); under 0.4 it runs.
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
TASK_IDS = ["train-00003", "train-00003", "train-00004", "train-00004", "train-00005", "train-00005"]


@pytest.fixture(scope="module")
def server():
    started = HashServer()
    yield started
    started.stop()


def config(project: Path, name: str, url: str, out: str, extra: str, url_key: str) -> Path:
    path = project / name
    path.write_text(TOML.format(url_key=url_key, url=url, key=KEY_VAR, out=project / out, extra=extra)
                    + '\n[[eval]]\nenv_id = "vf_task_id"\n')
    return path


def last_error(done) -> str:
    return done.stderr.strip().splitlines()[-1]


def prime(project: Path, *args: str):
    return run(project, ["-m", "primekit_cli", *args], [Path.cwd()])


def incomplete(run_dir: Path, keep: int, rekey=None) -> None:
    """Cut ``run_dir`` back to its first ``keep`` rows (``rekey`` rewrites each kept row) and mark it unfinished."""
    results = run_dir / "results.jsonl"
    rows = [json.loads(line) for line in results.read_text().splitlines()][:keep]
    results.write_text("".join(json.dumps(rekey(r) if rekey else r) + "\n" for r in rows))
    meta = json.loads((run_dir / "metadata.json").read_text())
    (run_dir / "metadata.json").write_text(json.dumps({**meta, "status": "incomplete"}))


@pytest.mark.skipif(not LEGACY, reason="legacy environments need verifiers 0.3.1")
def test_a_task_payload_id_keys_the_rows_as_vf_eval_writes_it(verifiers_project, server):
    project = verifiers_project
    vf_toml = config(project, "vf.toml", server.base_url, "vf-out", "save_results = true\ndisable_tui = true",
                     "api_base_url")
    done = run(project, ["-c", "import sys; from verifiers.legacy.scripts.eval import main; sys.exit(main())",
                         str(vf_toml)], [project / "environments" / "vf_task_id"])
    assert done.returncode == 0, done.stderr[-3000:]
    done = prime(project, "eval", "run", str(config(project, "pk.toml", server.base_url, "pk-out", "", "base_url")))
    assert done.returncode == 0, done.stderr[-3000:]

    theirs, ours = rows_of(project / "vf-out", "vf_task_id"), rows_of(project / "pk-out", "vf_task_id")
    assert sorted(r["example_id"] for r in theirs) == sorted(r["example_id"] for r in ours) == TASK_IDS  # as done
    assert all(r["error"] is None for r in ours)
    assert comparable(ours) == comparable(theirs)
    answers = {r["example_id"]: (r["answer"], r["info"]) for r in theirs}
    assert [(r["answer"], r["info"]) for r in ours] == [answers[r["example_id"]] for r in ours]  # the payload's
    assert {r["reward"] for r in ours} == {0.0, 1.0}

    vf_dir, pk_dir = (next(out.glob("evals/vf_task_id*/*")) for out in (project / "vf-out", project / "pk-out"))
    view = prime(project, "eval", "view", str(vf_dir), str(pk_dir))
    assert view.returncode == 0, view.stderr[-3000:]
    assert "on 3 paired examples" in " ".join(view.stdout.split())  # verifiers' own run dir pairs with ours

    out = project / "sft.jsonl"
    done = prime(project, "data", "from-eval", str(pk_dir), "-o", str(out), "--min-reward", "0")
    assert done.returncode == 0, done.stderr[-3000:]
    provenance = [json.loads(line)["provenance"] for line in out.read_text().splitlines()]
    assert [(p["example_id"], p["rollout_idx"]) for p in provenance] == [(eid, i % 2) for i, eid in enumerate(TASK_IDS)]

    incomplete(pk_dir, 3)
    done = prime(project, "eval", "run", str(project / "pk.toml"), "-R")
    assert done.returncode == 0 and "resuming" in done.stdout, done.stderr[-3000:]
    resumed = [json.loads(line) for line in (pk_dir / "results.jsonl").read_text().splitlines()]
    assert sorted((r["example_id"], r["rollout_idx"]) for r in resumed) == [
        (eid, i % 2) for i, eid in enumerate(TASK_IDS)
    ]


@pytest.mark.skipif(not LEGACY, reason="legacy environments need verifiers 0.3.1")
def test_a_run_dir_keyed_by_index_resumes_by_index(verifiers_project, server):
    """A run dir an older primekit wrote (rows keyed 0, 1, 2) goes on with the same keys, never mixing in task ids."""
    project = verifiers_project
    toml = config(project, "pk.toml", server.base_url, "pk-out", "", "base_url")
    done = prime(project, "eval", "run", str(toml))
    assert done.returncode == 0, done.stderr[-3000:]
    (run_dir,) = (project / "pk-out").glob("evals/vf_task_id*/*")
    incomplete(run_dir, 3, rekey=lambda r: {**r, "example_id": int(r["example_id"][-5:]) - 3})
    done = prime(project, "eval", "run", str(toml), "-R")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "keys its rows by index" in " ".join(done.stdout.split())
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert sorted((r["example_id"], r["rollout_idx"]) for r in rows) == [(i // 2, i % 2) for i in range(6)]
    assert [r["prompt"][-1]["content"] for r in sorted(rows, key=lambda r: r["example_id"])][::2] == \
        ["What is 3+7?", "What is 4+9?", "What is 5+11?"]  # index i is still the i-th task
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["status"] == "complete" and meta["num_rollouts"] == 6


def test_a_verifiers_module_the_installed_version_lacks_is_named_with_that_version(verifiers_project, server):
    project = verifiers_project
    done = prime(project, "eval", "run", "vf-v1-newer", "-m", "hash-model", "-b", server.base_url, "-k", KEY_VAR,
                 "-n", "2", "-r", "1", "-o", "out")
    if LEGACY:
        assert done.returncode == 2, done.stderr[-3000:]
        assert last_error(done) == (
            "error: environment 'vf-v1-newer' imports verifiers.v1.configs.select, which the installed verifiers "
            "0.3.1 does not have (No module named 'verifiers.v1.configs.select'); it was written for another "
            "verifiers version: run it with the one it needs (primekit runs 0.3.1 and 0.4.x)")
        assert "Traceback" not in done.stderr
    else:
        assert done.returncode == 0, done.stderr[-3000:]
        (results,) = (project / "out").glob("evals/*/*/results.jsonl")
        assert len(results.read_text().splitlines()) == 2
    folder = project / "environments" / "vf_v1_lacks_name"
    folder.mkdir()
    (folder / "vf_v1_lacks_name.py").write_text("from verifiers.v1 import NoSuchTaskset\n")
    done = prime(project, "eval", "run", "vf-v1-lacks-name", "-n", "1", "-o", "out")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    line = last_error(done)
    assert "cannot import name 'NoSuchTaskset' from 'verifiers.v1'" in line
    assert line.endswith(f"(verifiers {verifiers.__version__} is installed)") and "not installed" not in line
