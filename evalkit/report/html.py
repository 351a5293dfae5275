"""`prime eval view --html`: one self-contained HTML file for one or more run dirs of one kind.

Self-contained means it works offline and when mailed alone: the CSS and the script (sorting,
search, filters, pages) are inlined from this package's ``static/`` folder, the charts are inline
SVG drawn by matplotlib, and the rollouts are an inline JSON block. The page loads nothing from the
network; its Content-Security-Policy forbids it. Rendering uses jinja2 with autoescaping on, so text
from runs (prompts, completions, errors) is shown, never interpreted.
"""

from __future__ import annotations

import time
from importlib import resources
from pathlib import Path
from typing import Any

from evalkit.core.errors import UserError
from evalkit.core.fileio import write_text_atomic
from evalkit.core.runs import require_one_kind

DEFAULT_NAME = "report.html"
COMPARE_NAME = "compare.html"


def default_output(run_dirs: list[Path]) -> Path:
    """``<run>/report.html`` for one run; ``<first run>/compare.html`` for several."""
    return run_dirs[0] / (DEFAULT_NAME if len(run_dirs) == 1 else COMPARE_NAME)


def build_context(run_dirs: list[Path]) -> dict[str, Any]:
    """Load the runs (all of one kind) and build what the template shows."""
    kind = require_one_kind(run_dirs)
    labels = _labels(run_dirs)
    if kind == "eval":
        from evalkit.report.eval_data import load_eval_run
        from evalkit.report.html_eval import eval_context

        return eval_context([load_eval_run(path, label) for path, label in zip(run_dirs, labels)])
    if kind == "sweep":
        from evalkit.report.html_sweep import sweep_context
        from evalkit.report.sweep_data import load_sweep

        return sweep_context([load_sweep(path, label) for path, label in zip(run_dirs, labels)])
    if kind == "gepa":
        from evalkit.report.gepa_data import load_gepa_run
        from evalkit.report.html_gepa import gepa_context

        return gepa_context([load_gepa_run(path, label) for path, label in zip(run_dirs, labels)])
    from evalkit.report.html_rl import rl_context
    from evalkit.report.rl_data import load_rl_run

    if kind == "sft":
        from evalkit.report.sft_data import sft_context

        return sft_context([load_rl_run(path, label) for path, label in zip(run_dirs, labels)])

    return rl_context([load_rl_run(path, label) for path, label in zip(run_dirs, labels)])


def render_html(context: dict[str, Any]) -> str:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(resources.files("evalkit.report") / "templates")),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["num"] = _num
    static = resources.files("evalkit.report") / "static"
    page = env.get_template("report.html.j2")
    return page.render(
        **context,
        css=(static / "report.css").read_text(encoding="utf-8"),
        js=(static / "report.js").read_text(encoding="utf-8"),
        generated=time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        version=_version(),
    )


def write_report(run_dirs: list[Path], output: Path | None = None) -> Path:
    """Render the report of ``run_dirs`` to ``output`` (default: :func:`default_output`) atomically."""
    target = output or default_output(run_dirs)
    if target.is_dir():
        target = target / DEFAULT_NAME
    if not target.parent.is_dir():
        raise UserError(f"cannot write {target}: folder {target.parent} does not exist")
    write_text_atomic(target, render_html(build_context(run_dirs)))
    return target


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("primekit")
    except metadata.PackageNotFoundError:
        return "unknown"


def _labels(run_dirs: list[Path]) -> list[str | None]:
    """Short, distinct names for comparisons: the runs' ``<env>--<model>`` folders when those differ,
    else the run folders' names, else full paths. One run keeps its own default label (``None``)."""
    if len(run_dirs) == 1:
        return [None]
    for names in ([p.parent.name for p in run_dirs], [p.name for p in run_dirs]):
        if len(set(names)) == len(names):
            return list(names)
    return [str(p) for p in run_dirs]


def _num(value: Any, digits: int = 4) -> str:
    """A number for a table cell ('' for missing; integers without decimals)."""
    if value is None or value == "":
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) or (isinstance(value, float) and digits == 0):
        return f"{value:,.0f}" if not isinstance(value, int) else f"{value:,}"
    if isinstance(value, float):
        if digits >= 3 and value != 0 and abs(value) < 10 ** -digits:  # tiny losses/KLs; not seconds
            return f"{value:.2e}"
        return f"{value:.{digits}f}"
    return str(value)
