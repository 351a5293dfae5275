"""A step's metrics under prime-rl's names (:mod:`evalkit.report.rl_names` says the scheme), from the
step's rollouts and the trainer's statistics, and the W&B table of rollout samples.

Rollouts that errored without a score are rollouts (they count in ``has_error``, turns and tokens) but
not rewards: ``reward`` stats are over scored rollouts, as everywhere in primekit. ``effective`` is what
the step trained on: the groups the difficulty filter kept, less errored rollouts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from evalkit.core.types import RolloutState
from evalkit.report.rl_names import AGENT, OLD_NAMES

SAMPLES_PER_STEP = 8
"""Rollouts per step in the W&B ``samples`` table (the first of each kept group, then others)."""
SAMPLE_CHARS = 2000
"""Characters kept of a sample's prompt and completion in the W&B table."""


def stat(prefix: str, values: Sequence[float]) -> dict[str, float]:
    """prime-rl's ``Stat.to_dict``: ``mean, max, min, p10, p90`` (linear-interpolated percentiles); none when empty."""
    if not values:
        return {}
    ordered = sorted(float(v) for v in values)

    def percentile(q: float) -> float:
        rank = q / 100 * (len(ordered) - 1)
        low = int(rank)
        high = min(low + 1, len(ordered) - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)

    return {f"{prefix}/mean": sum(ordered) / len(ordered), f"{prefix}/max": ordered[-1], f"{prefix}/min": ordered[0],
            f"{prefix}/p10": percentile(10), f"{prefix}/p90": percentile(90)}


def subset_metrics(prefix: str, states: Sequence[RolloutState], errors: bool) -> dict[str, float]:
    """One ``{scope}/{subset}`` block: episode-level token and turn counts, then the agent's trace-level
    metrics (reward, counts, truncation rate; error rate and kinds when ``errors``)."""
    if not states:
        return {}
    counts = {
        "num_total_tokens": [s.usage.input_tokens + s.usage.output_tokens for s in states],
        "num_input_tokens": [s.usage.input_tokens for s in states],
        "num_output_tokens": [s.usage.output_tokens for s in states],
        "num_turns": [s.turns for s in states],
    }
    agent = f"{prefix}/{AGENT}"
    out: dict[str, float] = {}
    for name, values in counts.items():
        out |= stat(f"{prefix}/{name}", values)
    out |= stat(f"{agent}/reward", [s.reward for s in states if s.scored])
    for name, values in counts.items():
        out |= stat(f"{agent}/{name}", values)
    out[f"{agent}/is_truncated/mean"] = _rate(s.is_truncated for s in states)
    if errors:
        out[f"{prefix}/has_error/mean"] = out[f"{agent}/has_error/mean"] = _rate(bool(s.error) for s in states)
        kinds = [s.kind_of_error for s in states if s.error]
        out |= {f"{agent}/error/{kind}": float(kinds.count(kind)) for kind in sorted(set(kinds), key=str)}
    return out


def rollout_metrics(generated: Sequence[list[RolloutState]], kept: Sequence[list[RolloutState]],
                    env_of: dict[int, str], default_env: str) -> dict[str, float]:
    """The step's rollout metrics over ``train/agg`` and each ``train/<env>``, subsets ``all`` and ``effective``."""
    kept_ids = {id(group) for group in kept}
    rows = [(state, id(group) in kept_ids) for group in generated for state in group]
    scopes: dict[str, list[tuple[RolloutState, bool]]] = {"train/agg": rows}
    for state, is_kept in rows:
        scopes.setdefault(f"train/{env_of.get(state.example_id, default_env)}", []).append((state, is_kept))
    out: dict[str, float] = {}
    for scope, members in scopes.items():
        out |= subset_metrics(f"{scope}/all", [s for s, _ in members], errors=True)
        out |= subset_metrics(f"{scope}/effective", [s for s, k in members if k and not s.error], errors=False)
    return out


def trainer_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    """prime-rl's trainer names for the numbers primekit's step line already holds under its old names."""
    old_to_new = {old: new for new, old in OLD_NAMES.items() if not new.startswith("train/")}
    return {new: metrics[old] for old, new in old_to_new.items() if old in metrics}


def eval_metrics(env: str, states: Sequence[RolloutState], k: int) -> dict[str, float]:
    """``eval/<env>/{all,effective}/...`` with ``avg@k`` (mean scored reward) and, when every reward is 0 or 1,
    prime-rl's unbiased ``pass@k`` / ``pass^k`` for k = 1, 2, 4, ... up to the group size."""
    clean = [s for s in states if not s.error]
    out = subset_metrics(f"eval/{env}/all", states, errors=True) | subset_metrics(
        f"eval/{env}/effective", clean, errors=False
    )
    for subset, chosen in (("all", states), ("effective", clean)):
        rewards = [s.reward for s in chosen if s.scored]
        if rewards:
            out[f"eval/{env}/{subset}/{AGENT}/avg@{k}"] = sum(rewards) / len(rewards)
    out |= {f"eval/{env}/effective/{AGENT}/{key}": value for key, value in pass_at_k(clean).items()}
    return out


def pass_at_k(states: Sequence[RolloutState]) -> dict[str, float]:
    """prime-rl's ``pass@k``/``pass^k`` averaged over examples; empty unless every reward is 0 or 1."""
    import math

    if not states or any(s.reward not in (0.0, 1.0) for s in states):
        return {}
    groups: dict[int, list[float]] = {}
    for state in states:
        groups.setdefault(state.example_id, []).append(state.reward)
    totals: dict[str, list[float]] = {}
    for rewards in groups.values():
        n, c, k = len(rewards), sum(1 for r in rewards if r == 1.0), 1
        while k <= n:
            totals.setdefault(f"pass@{k}", []).append(1.0 - math.comb(n - c, k) / math.comb(n, k))
            totals.setdefault(f"pass^{k}", []).append(math.comb(c, k) / math.comb(n, k))
            k *= 2
    return {key: sum(values) / len(values) for key, values in totals.items()}


SAMPLE_COLUMNS = ["step", "env", "example_id", "rollout_idx", "prompt", "completion", "reward", "advantage",
                  "is_truncated", "turns", "error"]


def sample_rows(step: int, groups: Iterable[list[RolloutState]], env_of: dict[int, str], default_env: str,
                advantages: dict[tuple[int, int], float], limit: int = SAMPLES_PER_STEP) -> list[list[Any]]:
    """Up to ``limit`` rollouts of the step as rows of :data:`SAMPLE_COLUMNS` (texts capped, secrets already
    redacted)."""
    from evalkit.core.untrusted import cap_text

    rows = []
    for group in groups:
        for state in group:
            if len(rows) >= limit:
                return rows
            rows.append([step, env_of.get(state.example_id, default_env), state.example_id, state.rollout_idx,
                         cap_text(_text(state.prompt), SAMPLE_CHARS), cap_text(_text(state.completion), SAMPLE_CHARS),
                         state.reward, advantages.get((state.example_id, state.rollout_idx)), state.is_truncated,
                         state.turns, state.error])
    return rows


def _text(messages: list[Any]) -> str:
    parts = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else str(message)
        role = message.get("role", "?") if isinstance(message, dict) else "?"
        parts.append(f"{role}: {content if isinstance(content, str) else content!r}")
    return "\n".join(parts)


def _rate(flags: Iterable[bool]) -> float:
    values = [1.0 if flag else 0.0 for flag in flags]
    return sum(values) / len(values) if values else 0.0
