"""Does `prime gepa run` find better prompts than plain `gepa.optimize`, at the same budget, and how fast?

A prompt-sensitive tool environment with a deterministic task model: each question is ``RULE: word``
(reverse, upper, sort, count, vowels, double, first, last) or ``lookup: word``. The task model applies a
rule only when the system prompt holds that rule's instruction, and calls the ``lookup`` tool only when
the tool's description says what it is for; otherwise it answers wrongly. So accuracy is a function of
the two texts, and a good instruction is findable. The reflection model is scripted: it reads the
examples in gepa's reflection prompt and adds the instruction of the first rule there that the current
text lacks (or, for the tool descriptions, what the tool is for). Every model call sleeps ``--latency``
seconds, like a server would. Both models are the test suite's scripted client, called on an event loop
thread by both runs (plain gepa's ``reflection_lm`` too), so the route to a model costs both the same.

Four runs with the same data, adapter (primekit's ``SystemPromptAdapter``), budget and seed: primekit's
job (``run_gepa``: our budget, stoppers, proposer) and plain ``gepa.optimize`` (``max_metric_calls``,
gepa's own reflection), each with merge off and on, optimizing the system prompt and the tool
descriptions. Printed: validation score of the seed and of the best candidate (mean over the same
validation examples), metric calls (rollouts) spent, wall time, and wall time per metric call. Each pair runs
``--repeat`` times (3), in alternating order; a time shown is the least of those runs (on a shared machine
other processes only ever add time; the searches are the same each time).

    python bench/gepa_gain.py                      # defaults below
    python bench/gepa_gain.py --budget 150 --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.scripted_client import ScriptedClient, tool_call_reply  # noqa: E402  (the test suite's scripted model)

from evalkit.core.aio import LoopThread, Slots  # noqa: E402
from evalkit.core.types import SamplingArgs  # noqa: E402
from evalkit.envs import Rubric, ToolEnv  # noqa: E402
from gepa_cli.adapter import SystemPromptAdapter  # noqa: E402
from gepa_cli.budget import RolloutBudget  # noqa: E402
from gepa_cli.components import available  # noqa: E402
from gepa_cli.config import EnvSpec, GepaJobConfig  # noqa: E402
from gepa_cli.data import build_examples  # noqa: E402
from gepa_cli.runner import run_gepa  # noqa: E402

RULES = {
    "reverse": ("For reverse tasks, write the word backwards.", lambda w: w[::-1]),
    "upper": ("For upper tasks, write the word in capitals.", str.upper),
    "sort": ("For sort tasks, sort the letters alphabetically.", lambda w: "".join(sorted(w))),
    "count": ("For count tasks, reply with the number of letters.", lambda w: str(len(w))),
    "vowels": ("For vowels tasks, keep only the vowels.", lambda w: "".join(c for c in w if c in "aeiou") or "-"),
    "double": ("For double tasks, write every letter twice.", lambda w: "".join(c + c for c in w)),
    "first": ("For first tasks, reply with the first letter.", lambda w: w[0]),
    "last": ("For last tasks, reply with the last letter.", lambda w: w[-1]),
}
TOOL_USE = "Use it for lookup tasks."
SEED_PROMPT = "Solve the task."


def codebook(word: str) -> str:
    """``lookup``'s answers: a fixed scramble no rule produces."""
    return "".join(chr((ord(c) - 97 + 7) % 26 + 97) for c in word)


def lookup(word: str) -> str:
    """Returns a value.

    Args:
        word: the word of the task.
    """
    return codebook(word)


def exact(completion, answer) -> float:
    return float(str(completion[-1].get("content") or "").strip() == answer)


def make_rows(n: int, seed: int = 7, kinds: list[str] | None = None) -> list[dict[str, str]]:
    """``n`` tasks ``{"question": "KIND: word", "answer": ...}``, the kinds in turn, shuffled."""
    rng = random.Random(seed)
    kinds = kinds or [*RULES, "lookup"]
    rows = []
    for i in range(n):
        word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 7)))
        kind = kinds[i % len(kinds)]
        rows.append(
            {"question": f"{kind}: {word}", "answer": codebook(word) if kind == "lookup" else RULES[kind][1](word)}
        )
    rng.shuffle(rows)
    return rows


def make_env(n: int, seed: int = 7) -> ToolEnv:
    rows = make_rows(n, seed)
    return ToolEnv(dataset=rows[: n // 2], eval_dataset=rows[n // 2:], system_prompt=SEED_PROMPT,
                   rubric=Rubric([exact]), tools=[lookup], max_turns=3)


def task_model(messages, sampling, tools):
    """Deterministic: applies a rule only when the system prompt says how; uses the tool only when told what for."""
    if messages[-1]["role"] == "tool":
        return messages[-1]["content"]
    kind, word = messages[-1]["content"].split(": ", 1)
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    if kind == "lookup":
        described = " ".join(t["function"]["description"] for t in tools or [])
        return tool_call_reply("lookup", f'{{"word": "{word}"}}') if TOOL_USE in described else word
    return RULES[kind][1](word) if RULES[kind][0] in system else word


def teacher_text(prompt: str) -> str:
    """Scripted reflection: add what the examples shown need and the current text lacks."""
    current = prompt.split("```")[1].strip()
    kinds = re.findall(r"\b(" + "|".join([*RULES, "lookup"]) + r"): [a-z]+", prompt.split("```", 2)[2])
    if current.startswith("{"):
        import json

        described = json.loads(current)
        if "lookup" in kinds and TOOL_USE not in described.get("lookup", ""):
            described["lookup"] = f"{described['lookup']} {TOOL_USE}"
        return "```\n" + json.dumps(described) + "\n```"
    missing = [k for k in dict.fromkeys(kinds) if k in RULES and RULES[k][0] not in current]
    return f"```\n{current} {RULES[missing[0]][0] if missing else ''}".rstrip() + "\n```"


def scripted_teacher(latency: float) -> ScriptedClient:
    """The reflection model both runs call: a client of the project's API on an event loop, as a real teacher
    would be (plain gepa's ``reflection_lm`` calls it through the same loop, so neither pays a cheaper route)."""
    return ScriptedClient(lambda m, s, t: teacher_text(m[0]["content"]), model="teacher", delay_s=latency)


def ours(args: argparse.Namespace, seed: int, merge: bool, root: Path) -> dict:
    config = GepaJobConfig(envs=[EnvSpec(id="gain")], model="scripted", max_calls=args.budget, num_train=args.train,
                           num_val=args.val, minibatch_size=3, max_concurrent=args.concurrency, seed=seed,
                           run_dir=str(root / f"ours-{seed}-{merge}"), components=["system_prompt", "tools"],
                           use_merge=merge, reflection_sampling={"max_tokens": 256},
                           perfect_score=1.0)  # gepa's default: no reflection on a minibatch the parent aces
    stamps = Stamps(args.latency)
    task = ScriptedClient(stamps, delay_s=args.latency)
    teacher = scripted_teacher(args.latency)
    started = time.perf_counter()
    outcome = run_gepa(config, clients=(task, teacher), envs=[make_env(args.examples)], show_progress=False,
                       console=Console(quiet=True))
    return {
        "seed_score": outcome.seed_val_score,
        "best": outcome.best_val_score,
        "calls": outcome.total_metric_calls,
        "wall": time.perf_counter() - started,
        "candidates": outcome.num_candidates,
        "within": outcome.best_val_score,
        "search": stamps.span(),
        "replies": stamps.since(started),
    }


def plain(args: argparse.Namespace, seed: int, merge: bool, run_dir: Path | None = None) -> dict:
    """``run_dir``: gepa's own resume support (it saves its state there each iteration), the durability ``ours``
    gives; without it gepa writes nothing and a killed run starts over."""
    import gepa

    stamps = Stamps(args.latency)
    task = ScriptedClient(stamps, delay_s=args.latency)
    # timed from the same point as ``ours``: building the environment and splitting its examples included
    started = time.perf_counter()
    env = make_env(args.examples)
    train, val = build_examples([env], ["gain"], args.train, args.val, seed)
    loop = LoopThread()
    adapter = SystemPromptAdapter([env], task, loop, RolloutBudget(10**9), bound=Slots(args.concurrency))

    teacher = scripted_teacher(args.latency)

    def reflection_lm(prompt: str) -> str:
        return loop.run(teacher.chat([{"role": "user", "content": prompt}], SamplingArgs())).text or ""

    try:
        result = gepa.optimize(seed_candidate=dict(available([env])), trainset=train, valset=val, adapter=adapter,
                               reflection_lm=reflection_lm, max_metric_calls=args.budget, reflection_minibatch_size=3,
                               use_merge=merge, seed=seed, display_progress_bar=False,
                               logger=_Quiet(), run_dir=None if run_dir is None else str(run_dir))
    finally:
        loop.close()
    scores = list(result.val_aggregate_scores)
    # gepa checks max_metric_calls only before an iteration, so its last one may overspend. Within the budget
    # are the candidates whose validation pass had finished by then: gepa records a candidate's discovery
    # count before adding its validation rollouts (every one of them, with full_eval and no cache)
    within = [score for score, calls in zip(scores, result.discovery_eval_counts) if calls + len(val) <= args.budget]
    return {"seed_score": scores[0], "best": max(scores), "calls": result.total_metric_calls,
            "wall": time.perf_counter() - started, "candidates": len(scores), "within": max(within),
            "search": stamps.span(), "replies": stamps.since(started)}


class Stamps:
    """The task model, noting when each call's reply is made (after the client's latency): from the first
    call's start to the last call's end is the search itself; the rest of a run's wall time is what it does
    before (setup, the run dir) and after (the last files)."""

    def __init__(self, latency: float):
        self.latency = latency
        self.times: list[float] = []

    def __call__(self, messages, sampling, tools):
        self.times.append(time.perf_counter())
        return task_model(messages, sampling, tools)

    def span(self) -> float:
        return self.times[-1] - self.times[0] + self.latency

    def since(self, started: float) -> list[float]:
        """When each task-model reply was made, counted from the run's start."""
        return [t - started + self.latency for t in self.times]


class _Quiet:
    def log(self, message: str) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", type=int, default=200, help="metric calls (rollouts) for every run")
    parser.add_argument("--examples", type=int, default=180, help="rows in the environment (half train, half eval)")
    parser.add_argument("--train", type=int, default=40)
    parser.add_argument("--val", type=int, default=18)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.02, help="seconds each model call takes")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of each pair (in alternating order); each time shown is the least over them, since "
                             "other processes on the machine only ever add time (the searches are the same every run)")
    parser.add_argument("--plain-run-dir", action="store_true",
                        help="also run plain gepa with a run_dir (its own state saved each iteration, so a killed run "
                             "resumes), the durability prime gepa run always has")
    args = parser.parse_args()
    print(f"budget {args.budget} rollouts · train {args.train} · val {args.val} · latency {args.latency * 1000:.0f} ms "
          f"· concurrency {args.concurrency} · components system_prompt+tools")
    print("best val: the best candidate's mean validation score; within budget: the best one found by the "
          "time the budget was spent (gepa may overspend)")
    print("search: from the first task-model call to the last; outside: the rest of the wall time (setup, run files)")
    print("same work: ms per task-model reply over the first N replies, N the smaller count of the pair (the runs "
          "differ in length: gepa's last iteration overspends, and a long validation pass costs less per call)")
    print(f"times: the least of {args.repeat} run(s) of each")
    print(f"{'run':<27}{'seed':>5}{'seed val':>9}{'best val':>9}{'within budget':>14}{'calls':>7}{'cands':>6}"
          f"{'wall s':>8}{'ms/call':>9}{'search s':>10}{'ms/call':>9}{'outside s':>10}{'same work':>11}")
    with tempfile.TemporaryDirectory() as tmp:
        ours(args, 99, False, Path(tmp))  # warm-up: imports and first-use costs are not either run's
        for merge in (False, True):
            for seed in args.seeds:
                runs = [("prime gepa run", lambda k: ours(args, seed, merge, Path(tmp) / str(k))),
                        ("plain gepa.optimize", lambda k: plain(args, seed, merge))]
                if args.plain_run_dir:
                    runs.append(
                        ("plain, run_dir", lambda k: plain(args, seed, merge, Path(tmp) / f"plain-{seed}-{merge}-{k}"))
                    )
                trials: dict[str, list[dict]] = {name: [] for name, _ in runs}
                for k in range(args.repeat):  # alternate which goes first, so a noisy machine does not favour one
                    for name, measure in (runs if (seed + k) % 2 == 0 else runs[::-1]):
                        trials[name].append(measure(k))
                shared = min(len(rows[0]["replies"]) for rows in trials.values())
                for name, _ in runs:
                    _print_row(f"{name}{' +merge' if merge else ''}", seed, _least(trials[name], shared), shared)


def _least(trials: list[dict], shared: int) -> dict:
    """The first trial's results, each time the least over the trials (whose searches are the same)."""
    assert len({(row["calls"], len(row["replies"])) for row in trials}) == 1, "the runs of one pair differ"
    row = dict(trials[0])
    row["wall"] = min(row["wall"] for row in trials)
    row["search"] = min(row["search"] for row in trials)
    row["outside"] = min(row["wall"] - row["search"] for row in trials)
    row["same"] = min(row["replies"][shared - 1] for row in trials) if shared else None
    return row


def _print_row(label: str, seed: int, row: dict, shared: int) -> None:
    calls = max(1, row["calls"])
    same = f"{1000 * row['same'] / shared:.2f}@{shared}" if shared else "n/a"
    print(f"{label:<27}{seed:>5}{row['seed_score']:>9.3f}{row['best']:>9.3f}{row['within']:>14.3f}"
          f"{row['calls']:>7}{row['candidates']:>6}{row['wall']:>8.2f}{1000 * row['wall'] / calls:>9.1f}"
          f"{row['search']:>10.2f}{1000 * row['search'] / calls:>9.1f}{row['outside']:>10.2f}{same:>11}", flush=True)


if __name__ == "__main__":
    main()
