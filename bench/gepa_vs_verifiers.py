"""`prime gepa run` against verifiers 0.4's own GEPA command (`vf-gepa`) on one v1 taskset, same budget and seed.

Run it with the verifiers 0.4 interpreter (both commands need verifiers 0.4):

    PYTHONPATH=$PWD .venv-vf04/bin/python bench/gepa_vs_verifiers.py --seeds 0 1 2

Both commands run as a user runs them, as subprocesses, against one OpenAI-compatible server on 127.0.0.1
(this file with ``--serve``) that plays two models, each call sleeping ``--latency``: ``task``, the
deterministic task model of bench/gepa_gain.py (it applies a rule only when the system prompt states
it), and ``teacher``, its scripted reflection model. The taskset (bench/gepa_gain_v1) holds gepa_gain's
eight rule kinds (no tool), ``--tasks`` tasks; both commands split them into train and validation
themselves (``-n``/``-N``, verifiers' ``--num-train``/``--num-val``), with the same seed and budget
(``-B``, verifiers' ``--max-total-rollouts``) and minibatch size 3.

vf-gepa's own defaults cannot run offline: the ``bash`` harness on the ``prime`` sandbox runtime, whose host
tunnel first downloads ``frpc`` (every rollout ends with ``SandboxError`` and scores 0, and the run goes on), and
any harness program runs through uv, which verifiers installs on first use with the program's dependencies.
So ``--vf-harness`` defaults to ``primekit-harness`` on the ``subprocess`` runtime: verifiers' own ``null``
chat program run by this interpreter, the harness `prime gepa run` uses for v1 tasksets (``--vf-harness
default`` keeps verifiers' choice, to see the failure).

Printed per run: wall time (process start to exit), rollouts (task requests the server answered: the tasks
are single-turn, so one per rollout; preflight requests left out) beside the command's own count, teacher
calls, candidates, the command's own best validation score, and its best prompt's score on every task of the
taskset with the same deterministic model (the two commands draw different validation sets).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO / "tests"))
from support.fault_server import ScriptServer, serve_forever  # noqa: E402  (the test suite's server plumbing)

ENV_ID = "gepa-gain-v1"
TASK = r"[a-z]+: [a-z]+"
"""A task's prompt (``KIND: word``)."""


def _text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def make_app(latency: float) -> Any:
    """``task`` and ``teacher`` (by the request's model name) over /v1/chat/completions, streamed or not."""
    import asyncio

    from aiohttp import web
    from gepa_gain import task_model, teacher_text

    from evalkit.clients.wire import completion_body, completion_events
    from evalkit.core.types import Completion, Usage

    counts: dict[str, int] = {}

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        model = str(body.get("model"))
        messages = [{**m, "content": _text(m.get("content"))} for m in body.get("messages") or []]
        last = messages[-1]["content"] if messages else ""
        kind = "teacher" if model == "teacher" and "```" in last else "task" if re.fullmatch(TASK, last) else "other"
        counts[kind] = counts.get(kind, 0) + 1  # "other": the commands' preflight requests
        await asyncio.sleep(latency)
        text = teacher_text(last) if kind == "teacher" else task_model(messages, None, None) if kind == "task" else "ok"
        completion = Completion(text=text, usage=Usage(input_tokens=9, output_tokens=len(text.split()) or 1))
        if not body.get("stream"):
            return web.json_response(completion_body(completion, model))
        reply = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await reply.prepare(request)
        for event in completion_events(completion, model, include_usage=True):
            await reply.write(event)
        return reply

    async def counted(request: web.Request) -> web.Response:
        return web.json_response(counts)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/counts", counted)
    return app


class Models(ScriptServer):
    """This file's server as a subprocess (its PID kept and stopped; never found by name)."""

    SCRIPT = Path(__file__).resolve()

    def counts(self) -> dict[str, int]:
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/counts", timeout=5) as response:
            return json.loads(response.read())


def write_taskset(root: Path, n: int) -> Path:
    """The taskset folder (its module and ``tasks.json``) under ``root/environments``."""
    import shutil

    from gepa_gain import RULES, SEED_PROMPT, make_rows

    folder = root / "environments" / ENV_ID.replace("-", "_")
    folder.mkdir(parents=True)
    shutil.copy(BENCH / "gepa_gain_v1" / "gepa_gain_v1.py", folder)
    rows = [
        {"prompt": r["question"], "answer": r["answer"], "system_prompt": SEED_PROMPT}
        for r in make_rows(n, kinds=list(RULES))
    ]
    (folder / "tasks.json").write_text(json.dumps(rows))
    return folder


def score_on_all(prompt: str, folder: Path) -> float:
    """The deterministic task model's accuracy with ``prompt`` on every task of the taskset."""
    from gepa_gain import task_model

    rows = json.loads((folder / "tasks.json").read_text())
    right = [
        task_model([{"role": "system", "content": prompt}, {"role": "user", "content": r["prompt"]}], None, None)
        == r["answer"]
        for r in rows
    ]
    return sum(right) / len(rows)


def timed(command: list[str], cwd: Path, env: dict[str, str], log: Path) -> tuple[float, int]:
    started = time.perf_counter()
    with log.open("w") as out:
        code = subprocess.run(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=3600).returncode
    return time.perf_counter() - started, code


def run_prime(args: argparse.Namespace, seed: int, root: Path, url: str, env: dict[str, str]) -> dict[str, Any]:
    run_dir = root / f"prime-{seed}"
    command = [
        sys.executable,
        "-m",
        "primekit_cli",
        "gepa",
        "run",
        ENV_ID,
        "-p",
        "environments",
        "-m",
        "task",
        "-M",
        "teacher",
        "-b",
        url,
        "-B",
        str(args.budget),
        "-n",
        str(args.train),
        "-N",
        str(args.val),
        "--seed",
        str(seed),
        "-c",
        str(args.concurrency),
        "--minibatch-size",
        "3",
        "-o",
        str(run_dir),
    ]
    wall, code = timed(command, root, env, root / f"prime-{seed}.log")
    if code != 0:
        return {"error": _tail(root / f"prime-{seed}.log")}
    metadata = json.loads((run_dir / "metadata.json").read_text())
    prompt = (run_dir / "system_prompt.txt").read_text()
    return {"wall": wall, "best_val": metadata["best_score"], "tool_calls": metadata["total_metric_calls"],
            "prompt": prompt, "candidates": metadata["num_candidates"], "within_val": metadata["best_score"],
            "within_prompt": prompt}  # it never spends past -B


def run_verifiers(args: argparse.Namespace, seed: int, root: Path, url: str, env: dict[str, str]) -> dict[str, Any]:
    vf_gepa = Path(sys.executable).parent / "vf-gepa"
    command = [str(vf_gepa), ENV_ID, "--model", "task", "--reflection-model", "teacher", "--client.base-url", url,
               "--max-total-rollouts", str(args.budget), "--num-train", str(args.train), "--num-val", str(args.val),
               "--seed", str(seed), "--reflection-minibatch-size", "3", "-c", str(args.concurrency),
               "-o", str(root / "vf-out"), "--run.dir", f"vf-{seed}"]
    if args.vf_harness != "default":
        command += ["--env.agent.harness.id", args.vf_harness, "--env.agent.runtime.type", "subprocess"]
    vf_env = {
        **env,
        "PYTHONPATH": os.pathsep.join([str(root / "environments" / ENV_ID.replace("-", "_")), env["PYTHONPATH"]]),
    }
    wall, code = timed(command, root, vf_env, root / f"vf-{seed}.log")
    run_dir = root / "vf-out" / f"vf-{seed}"
    if code != 0 or not (run_dir / "best_system_prompt.txt").is_file():
        return {"error": _tail(root / f"vf-{seed}.log")}
    sys.path.insert(
        0, str(root / "environments" / ENV_ID.replace("-", "_"))
    )  # its pickled rollouts name the taskset's classes
    with (run_dir / "gepa_state.bin").open("rb") as handle:
        state = pickle.load(handle)  # gepa's own state file (written by gepa in this bench, read back here only)
    scores = [sum(sub.values()) / max(1, len(sub)) for sub in state["prog_candidate_val_subscores"]]
    # gepa checks max_metric_calls only before an iteration, so its last one may overspend: within the budget
    # are the candidates whose validation pass had finished by then (as in bench/gepa_gain.py)
    within = max(
        (i for i, calls in enumerate(state["num_metric_calls_by_discovery"]) if calls + args.val <= args.budget),
        key=lambda i: (scores[i], -i),
    )
    return {"wall": wall, "best_val": max(scores), "tool_calls": state["total_num_evals"],
            "prompt": (run_dir / "best_system_prompt.txt").read_text(), "candidates": len(scores),
            "within_val": scores[within], "within_prompt": state["program_candidates"][within]["system_prompt"]}


def _tail(log: Path, lines: int = 12) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", type=int, default=200, help="rollouts for each command")
    parser.add_argument("--tasks", type=int, default=120, help="tasks in the taskset")
    parser.add_argument("--train", type=int, default=40)
    parser.add_argument("--val", type=int, default=18)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.02, help="seconds each model call takes")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--vf-harness", default="primekit-harness", help="vf-gepa's harness id, or 'default'")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve_forever(make_app(args.latency), args.port)
        return
    print(f"budget {args.budget} rollouts · {args.tasks} tasks · train {args.train} · val {args.val} · "
          f"latency {args.latency * 1000:.0f} ms · concurrency {args.concurrency} · vf-gepa harness {args.vf_harness}")
    print("within budget: the best candidate whose validation pass had finished when the budget was spent")
    print(f"{'command':<16}{'seed':>5}{'wall s':>8}{'rollouts':>9}{'(own count)':>12}{'teacher':>8}{'cands':>6}"
          f"{'best val':>9}{'all tasks':>10}{'within budget: val':>19}{'all tasks':>10}")
    server = Models("--serve", "--latency", str(args.latency))
    env = {**os.environ, "OPENAI_API_KEY": "unused", "PRIME_API_KEY": "unused", "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            folder = write_taskset(root, args.tasks)
            print(f"{'seed prompt':<16}{'':>5}{'':>8}{'':>9}{'':>12}{'':>8}{'':>6}{'':>9}"
                  f"{score_on_all(json.loads((folder / 'tasks.json').read_text())[0]['system_prompt'], folder):>10.3f}")
            for seed in args.seeds:
                runs = [("prime gepa run", run_prime), ("vf-gepa (0.4)", run_verifiers)]
                for name, run in runs if seed % 2 == 0 else runs[::-1]:  # alternate which goes first
                    before = server.counts()
                    row = run(args, seed, root, server.base_url, env)
                    after = server.counts()
                    used = {m: after.get(m, 0) - before.get(m, 0) for m in ("task", "teacher")}
                    if "error" in row:
                        print(f"{name:<16}{seed:>5}  failed:\n{row['error']}")
                        continue
                    print(f"{name:<16}{seed:>5}{row['wall']:>8.2f}{used['task']:>9}{row['tool_calls']:>12}{used['teacher']:>8}"
                          f"{row['candidates']:>6}{row['best_val']:>9.3f}{score_on_all(row['prompt'], folder):>10.3f}"
                          f"{row['within_val']:>19.3f}{score_on_all(row['within_prompt'], folder):>10.3f}", flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
