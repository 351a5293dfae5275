"""Charts as inline SVG strings, drawn by matplotlib (Agg, no pyplot, no global figure state).

Each function takes plain data (one series per run, so several runs overlay in one chart) and
returns an ``<svg>`` element ready to paste into HTML: no XML prolog, text kept as text
(``svg.fonttype = none``) so the numbers on axes are searchable in the page, labels never parsed
as mathtext (a ``$`` in a metric name is a dollar sign), and a fixed hash salt
so the same data gives the same bytes. Run ``i`` is drawn in ``color(i)`` everywhere, so the HTML
legend can use the same colours.

The report never fails on values: a chart whose numbers matplotlib cannot lay out (a metric of 1e308 and
-1e308 spans more than a float holds, and its ticks cannot be computed) is replaced by a short SVG that says so
(:func:`_drawn`), and the rest of the page is written as usual.
"""

from __future__ import annotations

import functools
import io
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

MAX_LABELLED = 200
"""Candidates a scores chart labels with their index; more are drawn unlabelled."""
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
Series = tuple[str, Sequence[float], Sequence[float]]  # (label, xs, ys)


def _drawn(chart: Callable[..., str]) -> Callable[..., str]:
    """``chart``'s SVG, or one that says the chart could not be drawn from these values (never an exception)."""

    @functools.wraps(chart)
    def draw(*args: Any, **kwargs: Any) -> str:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # overflow in matplotlib's own arithmetic
                return chart(*args, **kwargs)
        except (ValueError, OverflowError, FloatingPointError):
            return ('<svg xmlns="http://www.w3.org/2000/svg" width="560" height="40" role="img">'
                    '<text x="8" y="24" font-size="12">chart not drawn: its values are too large to plot</text></svg>')

    return draw


def color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _figure(width: float = 5.6, height: float = 3.0) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg", force=False)
    # labels are the runs' own strings (metric names, prompts): text, never mathtext ("cost $5 or $6")
    matplotlib.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "primekit", "font.size": 9,
                                "axes.spines.top": False, "axes.spines.right": False, "text.parse_math": False})
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.add_subplot()


def _svg(fig: Any) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    text = buffer.getvalue()
    return text[text.index("<svg"):]


def _legend(ax: Any, count: int) -> None:
    if count > 1:
        ax.legend(fontsize=8, frameon=False)


@_drawn
def histogram(values: Sequence[Sequence[float]], labels: Sequence[str], xlabel: str, bins: int = 20) -> str:
    """Overlaid step histograms over one shared range (one per run)."""
    fig, ax = _figure()
    flat = [v for series in values for v in series]
    low, high = (min(flat), max(flat)) if flat else (0.0, 1.0)
    if high - low < 1e-12:
        low, high = low - 0.5, high + 0.5
    for i, (series, label) in enumerate(zip(values, labels)):
        ax.hist(list(series), bins=bins, range=(low, high), histtype="stepfilled" if len(values) == 1 else "step",
                alpha=0.6 if len(values) == 1 else 1.0, linewidth=1.6, color=color(i), label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("rollouts")
    _legend(ax, len(values))
    return _svg(fig)


@_drawn
def lines(series: Sequence[Series], xlabel: str, ylabel: str, *, markers: bool = True, integer_x: bool = False,
          bands: Sequence[Sequence[float] | None] | None = None, log_y: bool = False, counts: bool = False,
          unit_y: bool = False) -> str:
    """One line per series; ``bands`` (± values per point) shade around a line; ``counts``: integer y from 0;
    ``unit_y``: y spans 0..1."""
    fig, ax = _figure()
    for i, (label, xs, ys) in enumerate(series):
        ax.plot(list(xs), list(ys), marker="o" if markers else None, markersize=3.5, color=color(i), label=label)
        band = bands[i] if bands else None
        if band is not None:
            ax.fill_between(list(xs), [y - b for y, b in zip(ys, band)], [y + b for y, b in zip(ys, band)],
                            color=color(i), alpha=0.15, linewidth=0)
    if integer_x:
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if unit_y:  # a rate: show all of 0..1 so a flat line at 0.0 reads as 0, not as noise
        ax.set_ylim(-0.03, 1.03)
    if counts:  # whole numbers from zero up
        from matplotlib.ticker import MaxNLocator

        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(bottom=0, top=max([y for _, _, ys in series for y in ys] + [1]) * 1.15)
    if log_y and all(y > 0 for _, _, ys in series for y in ys):
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    _legend(ax, len(series))
    return _svg(fig)


@_drawn
def grouped_bars(
    categories: Sequence[str], values: Sequence[Sequence[float | None]], labels: Sequence[str], ylabel: str
) -> str:
    """Horizontal bars: one group per category, one bar per run (``None`` = the run lacks it)."""
    height = max(2.2, 0.5 + 0.28 * len(categories) * max(1, len(labels)))
    fig, ax = _figure(height=min(height, 9.0))
    n = max(1, len(labels))
    width = 0.8 / n
    for i, (series, label) in enumerate(zip(values, labels)):
        ys = [j + (i - (n - 1) / 2) * width for j in range(len(categories))]
        xs = [v if v is not None else math.nan for v in series]
        bars = ax.barh(ys, xs, height=width, color=color(i), label=label)
        ax.bar_label(bars, labels=[f"{v:.3f}" if v is not None else "" for v in series], fontsize=7, padding=2)
    ax.set_yticks(range(len(categories)), list(categories))
    ax.invert_yaxis()
    ax.set_xlabel(ylabel)
    ax.margins(x=0.15)
    _legend(ax, len(labels))
    return _svg(fig)


@_drawn
def dots(columns: Sequence[Sequence[float | None]], labels: Sequence[str], xlabel: str, ylabel: str) -> str:
    """One marker per example and run, examples in the given order (a profile to compare runs)."""
    fig, ax = _figure()
    for i, (series, label) in enumerate(zip(columns, labels)):
        xs = [j for j, v in enumerate(series) if v is not None]
        ys = [v for v in series if v is not None]
        ax.plot(xs, ys, linestyle="none", marker="o", markersize=3 if len(xs) > 200 else 4.5, alpha=0.75,
                color=color(i), label=label)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    _legend(ax, len(labels))
    return _svg(fig)


@_drawn
def candidate_scores(runs: Sequence[dict[str, Any]]) -> str:
    """GEPA: each candidate's score at the metric call that discovered it, lineage edges, best so far.

    ``runs``: ``{"label", "points": [(idx, calls, score, parents)], "best": idx}`` per run.
    """
    from matplotlib.collections import LineCollection

    fig, ax = _figure(height=3.4)
    for i, run in enumerate(runs):
        where = {idx: (calls, score) for idx, calls, score, _ in run["points"]}
        edges = [[where[parent], (calls, score)] for _, calls, score, parents in run["points"] for parent in parents
                 if parent in where]
        if edges:  # one collection: a run of thousands of candidates draws in a moment, not one line at a time
            ax.add_collection(LineCollection(edges, colors=color(i), alpha=0.3, linewidths=0.8))
        ordered = sorted(run["points"], key=lambda p: p[1])
        best_so_far, xs, ys = -math.inf, [], []
        for _, calls, score, _ in ordered:
            best_so_far = max(best_so_far, score)
            xs.append(calls)
            ys.append(best_so_far)
        ax.step(xs, ys, where="post", color=color(i), linewidth=1.4, label=f"{run['label']} (best so far)")
        ax.scatter([p[1] for p in ordered], [p[2] for p in ordered], s=22, color=color(i), zorder=3)
        if len(run["points"]) <= MAX_LABELLED:  # past that the labels are one black smear
            for idx, calls, score, _ in run["points"]:
                ax.annotate(str(idx), (calls, score), textcoords="offset points", xytext=(4, 4), fontsize=7)
        if run["best"] in where:
            ax.scatter([where[run["best"]][0]], [where[run["best"]][1]], s=140, marker="*", color=color(i),
                       edgecolor="black", zorder=4)
    ax.set_xlabel("metric calls (rollouts) when discovered")
    ax.set_ylabel("validation score")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, frameon=False)
    return _svg(fig)


@_drawn
def heatmap(matrix: Sequence[Sequence[float | None]], row_labels: Sequence[str], col_labels: Sequence[str],
            xlabel: str, ylabel: str, outlined: set[tuple[int, int]] | None = None) -> str:
    """A score grid (rows x columns, ``None`` = not scored); ``outlined`` cells get a black frame."""
    import numpy as np

    data = np.array([[math.nan if v is None else v for v in row] for row in matrix], dtype=float)
    fig, ax = _figure(width=5.6, height=max(1.8, min(8.0, 0.6 + 0.3 * len(row_labels))))
    image = ax.imshow(data, aspect="auto", cmap="viridis", vmin=np.nanmin(data) if np.isfinite(data).any() else 0,
                      vmax=np.nanmax(data) if np.isfinite(data).any() else 1, interpolation="nearest")
    fig.colorbar(image, ax=ax, shrink=0.8, label="score")
    if len(col_labels) <= 40:
        ax.set_xticks(range(len(col_labels)), list(col_labels), fontsize=7)
    if len(row_labels) <= 40:
        ax.set_yticks(range(len(row_labels)), list(row_labels), fontsize=7)
    from matplotlib.patches import Rectangle

    for r, c in outlined or set():
        ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="white", linewidth=1.5))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.spines[:].set_visible(False)
    return _svg(fig)


@_drawn
def stacked_bars(xs: Sequence[int], parts: dict[str, Sequence[float]], xlabel: str, ylabel: str,
                 overlay: tuple[str, Sequence[float]] | None = None) -> str:
    """Stacked bars per x (e.g. a step's time split) and an optional line on top."""
    fig, ax = _figure()
    bottom = [0.0] * len(xs)
    for i, (name, values) in enumerate(parts.items()):
        ax.bar(list(xs), list(values), bottom=bottom, color=color(i), label=name, width=0.8)
        bottom = [b + v for b, v in zip(bottom, values)]
    if overlay is not None:
        ax.plot(list(xs), list(overlay[1]), color="black", marker="o", markersize=3, linewidth=1.2, label=overlay[0])
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    fig.legend(loc="outside lower center", ncol=len(parts) + 1, fontsize=8, frameon=False)  # clear of the bars
    return _svg(fig)


@_drawn
def reward_curves(train: Sequence[Series], bands: Sequence[Sequence[float]], evals: Sequence[Series],
                  baselines: Sequence[Series], teachers: Sequence[tuple[str, float] | None] = ()) -> str:
    """RL reward: training-batch mean per step (± std shaded), eval points, the baseline at step 0, and a
    distillation run's teacher on the same held-out eval as a flat dotted line (the score it is distilled toward).

    Series ``i`` of each list belongs to run ``i`` and shares its colour (baselines may skip runs,
    so they are matched by label prefix).
    """
    fig, ax = _figure(height=3.4)
    for i, (label, xs, ys) in enumerate(train):
        ax.plot(list(xs), list(ys), marker="o", markersize=3, color=color(i), label=label)
        ax.fill_between(list(xs), [y - b for y, b in zip(ys, bands[i])], [y + b for y, b in zip(ys, bands[i])],
                        color=color(i), alpha=0.12, linewidth=0)
    for i, (label, xs, ys) in enumerate(evals):
        if xs:
            ax.plot(list(xs), list(ys), marker="D", markersize=5, linestyle="--", color=color(i), label=label)
            for x, y in zip(xs, ys):
                ax.annotate(f"{y:.3f}", (x, y), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7)
    train_labels = [label for label, _, _ in train]
    for label, xs, ys in baselines:
        i = next((j for j, name in enumerate(train_labels) if name.startswith(label.rsplit(" baseline", 1)[0])), 0)
        ax.scatter(list(xs), list(ys), marker="s", s=40, color=color(i), edgecolor="black", zorder=4, label=label)
    for i, teacher in enumerate(teachers):
        if teacher is not None:
            ax.axhline(teacher[1], color=color(i), linestyle=":", linewidth=1.4, label=f"{teacher[0]} {teacher[1]:.3f}")
    return _step_axes(fig, ax, "reward")


@_drawn
def sweep_curve(
    series: Sequence[Series], bands: Sequence[Sequence[float]], baselines: Sequence[tuple[str, float] | None]
) -> str:
    """Held-out reward per checkpoint step (± std shaded) and each run's baseline as a dashed line, with its
    value at step 0 marked, so every checkpoint reads against the model it started from."""
    fig, ax = _figure(height=3.4)
    for i, (label, xs, ys) in enumerate(series):
        ax.plot(list(xs), list(ys), marker="o", markersize=4, color=color(i), label=label)
        ax.fill_between(list(xs), [y - b for y, b in zip(ys, bands[i])], [y + b for y, b in zip(ys, bands[i])],
                        color=color(i), alpha=0.12, linewidth=0)
        for x, y in zip(xs, ys):
            ax.annotate(f"{y:.3f}", (x, y), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7)
    for i, base in enumerate(baselines):
        if base is not None:
            label, value = base
            ax.axhline(value, color=color(i), linestyle="--", linewidth=1.2, alpha=0.8, label=f"{label} {value:.3f}")
            ax.scatter([0], [value], marker="s", s=40, color=color(i), edgecolor="black", zorder=4)
    return _step_axes(fig, ax, "held-out reward")


def _step_axes(fig: Any, ax: Any, ylabel: str) -> str:
    """Whole-number steps on x, ``ylabel`` on y, a light grid and the legend; the figure as SVG."""
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, frameon=False)
    return _svg(fig)


def step_charts(runs: Sequence[Any], metrics: Sequence[tuple[str, str, bool]]) -> list[dict[str, str]]:
    """One line chart per ``(key, title, log_y)`` of ``metrics`` over the runs' steps (``run.label``, ``run.steps``:
    one dict a step), one line a run; a metric no step of any run has gets no chart."""
    charts = []
    for key, title, log in metrics:
        series = [
            (run.label, [m["step"] for m in run.steps if key in m], [m[key] for m in run.steps if key in m])
            for run in runs
        ]
        if any(xs for _, xs, _ in series):
            charts.append({"title": title, "svg": lines(series, "step", key, integer_x=True, log_y=log)})
    return charts
