"""verifiers 0.4's run-config forms on `prime eval run` and `prime gepa run`: ``@ config.toml``, a v1-shaped TOML
as the positional, a taskset id with dotted overrides (``--sampling.temperature 0.5``), read by
:mod:`primekit_cli.dialect.config` with verifiers' own config classes.

The argv step (:mod:`primekit_cli.argv`) takes the dialect's tokens out of the command line before click parses it
(so click never sees ``@`` or ``--a.b``, and primekit's own flags keep their strict parsing); the command reads them
back from its context with :func:`primekit_cli.argv.dialect_args`. primekit's flags (``-m``, ``-b``, ``-n``, ...) lay
over what the config says.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from evalkit.core.dotted import deep_merge
from primekit_cli.dialect.args import DialectArgs, is_v1_file, load_file


def wants_dialect(target: str | None, dialect: DialectArgs) -> bool:
    """Whether this command line is in verifiers 0.4's dialect: ``@`` files or dotted flags, or a v1-shaped TOML."""
    if dialect:
        return True
    return target is not None and target.endswith(".toml") and Path(target).is_file() and is_v1_file(load_file(target))


def plain_file(target: str | None, dialect: DialectArgs) -> tuple[str | None, DialectArgs]:
    """``@ file.toml`` of primekit's own shape (``[[eval]]`` / ``[[env]]``; verifiers' ``configs/eval|gepa``
    files), alone, is that file as the positional argument."""
    if target is None and len(dialect.files) == 1 and not dialect.overrides:
        (path,) = dialect.files
        if path.endswith(".toml") and not is_v1_file(load_file(path)):
            return path, DialectArgs()
    return target, dialect


def eval_configs(target: str | None, dialect: DialectArgs, overrides: dict[str, Any]) -> tuple[list[Any], Any]:
    """One primekit EvalConfig for the v1 run config (flags laid over it), and the plan it came from."""
    from evalkit.core.tomlio import validate
    from evalkit.eval.config import EvalConfig
    from primekit_cli.dialect.config import eval_plan

    plan = eval_plan(target, dialect, overrides.get("env_dir_path", "environments"))
    _print_notes(plan.notes)
    return [validate(EvalConfig, _laid_over(plan.fields, overrides), "verifiers run config")], plan


def gepa_fields(target: str | None, dialect: DialectArgs) -> dict[str, Any]:
    """GEPA job fields for the v1 run config (``vf-gepa``'s keys); flags are laid over them by the caller."""
    from primekit_cli.dialect.config import gepa_plan

    plan = gepa_plan(target, dialect)
    _print_notes(plan.notes)
    return plan.fields


def _laid_over(fields: dict[str, Any], flags: dict[str, Any]) -> dict[str, Any]:
    """Flags win; the ``sampling`` and ``env_args`` objects merge key by key."""
    merged = {**fields, **flags}
    for key in ("sampling", "env_args"):
        if key in fields and key in flags:
            merged[key] = deep_merge(fields[key], flags[key])
    return merged


def _print_notes(notes: list[str]) -> None:
    for note in notes:
        print(f"note: {note}", file=sys.stderr, flush=True)


def print_eval_plan(configs: list[Any], plan: Any | None) -> None:
    """``--dry-run``: the resolved eval(s) as JSON on stdout (and verifiers' own resolved config for a v1 file)."""
    from evalkit.core.redact import redact

    document: dict[str, Any] = {"evals": [config.model_dump(mode="json") for config in configs]}
    if plan is not None:
        document["verifiers"] = plan.resolved
    print(redact(json.dumps(document, indent=2, sort_keys=True)), flush=True)
