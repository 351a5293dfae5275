"""`prime gepa run`: optimize an environment's system prompt with GEPA.

Thin on purpose: parse flags (and a TOML), build one :class:`GepaJobConfig`, call
:func:`gepa_cli.runner.run_gepa`, print the summary. The gepa library, the environments and
the model clients are imported inside the command so ``prime --help`` stays instant.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from evalkit.core import runs
from evalkit.core.errors import UserError
from evalkit.core.json_args import parse_json_object
from evalkit.core.secrets_file import load_env_files
from evalkit.loading.resolve import parse_env_args
from gepa_cli.config import GepaJobConfig
from gepa_cli.search_options import SEARCH_RESUME_FIXED, GepaSearchFields
from gepa_cli.tracking import TrackingShortcuts
from primekit_cli import options
from primekit_cli.argv import GEPA_RUN, argv_command, dialect_args
from primekit_cli.commands.model_help import MODELS_EPILOG
from primekit_cli.compat_flags import GEPA_REFUSED, help_section
from primekit_cli.dialect.plans import gepa_fields, plain_file, wants_dialect
from primekit_cli.errors import user_errors

ENV_OR_CONFIG_HELP = (
    "Environment id or a GEPA TOML config (configs/gepa/*.toml), or a verifiers 0.4 run config (config.toml "
    "or @ config.toml; dotted overrides such as --sampling.temperature 0.5); "
    "left out (or a run directory) with --resume."
)

app = typer.Typer(help="Optimize an environment's system prompt with GEPA.", no_args_is_help=True)

EXAMPLES = (
    """
**Examples**

* `prime gepa run arithmetic -B 60 -n 12 -N 8` (embedded model, offline: a smoke test; the 135M teacher rarely """
    """improves a prompt)

* `prime gepa run arithmetic -B 60 -N 8 --dry-run` (what the budget buys, then stop)

* `prime gepa run reverse-text -m gpt-4.1-mini -M gpt-4.1` (a stronger teacher)

* `prime gepa run wordle --state-columns guesses feedback` (state keys shown to the teacher)

* `prime gepa run reverse-text -m Qwen/Qwen3-8B -b http://localhost:8000/v1 -M litellm/anthropic/claude-sonnet-4-5`
  (a teacher from another provider; key in $ANTHROPIC_API_KEY)

* `prime gepa run fact-search --components system_prompt,tools` (the tools' descriptions too; """
    """`--list-components` shows them)

* `prime gepa run configs/gepa/arithmetic.toml` (everything from a TOML)

* `prime gepa run @ gepa.toml --dry-run` (a verifiers 0.4 `vf-gepa` config: max_total_rollouts, """
    """reflection_minibatch_size, ...)

* `prime gepa run arithmetic --resume` (continue the newest killed run of arithmetic)

* `prime gepa run --resume outputs/gepa/arithmetic--local--smollm2-135m/RUN_ID` (continue that run)
"""
)


BUDGET_HELP = """
**Budget** (-B counts task-model rollouts): the seed's validation costs -N; each proposal costs 2 x --minibatch-size
(parent and child on one minibatch) plus -N when the child is accepted. Before any model call the run prints what
the budget buys, refuses a budget that buys no proposal, and warns below 3.
"""


GEPA_FLAGS = options.FlagTable(
    GepaJobConfig,
    options.MODEL,
    options.flag("reflection_model", "-M", extra="Any model -m accepts."),
    options.ENDPOINTS_PATH, options.BASE_URL, options.API_KEY_VAR, options.MAX_RETRIES, options.TIMEOUT, options.DEVICE,
    options.flag("max_calls", "-B"),
    options.flag("num_train", "-n"),
    options.flag("num_val", "-N"),
    options.flag("minibatch_size"),
    options.flag("perfect_score"),
    options.flag("stop_at_score"),
    options.ROLLOUT_TIMEOUT, options.SCORE_TIMEOUT, options.MAX_MESSAGE_CHARS,
    options.flag("state_columns", cli=list[str], extra="Space-separated (a b c)."),
    options.MAX_CONCURRENT,
    "sampling_args", "env_args", "extra_env_kwargs",
    options.flag("env_dir_path", "-p"),  # verifiers' GEPA script spells it -p (vf-eval's -p is --provider)
    options.flag("seed"),
    options.flag("run_dir", "-o"),
    "list_components", "dry_run", "resume",
    options.ENV_FILE,
    "verbose",
    options.group_flags(GepaSearchFields, panel="Search and stopping"),
    options.group_flags(TrackingShortcuts, panel="Tracking"),
)
"""``prime gepa run``'s options in ``--help`` order: the field flags, and where the hand-written ones go."""


@app.command("run", epilog=EXAMPLES + BUDGET_HELP + MODELS_EPILOG + help_section(GEPA_REFUSED, ()),
             context_settings={"help_option_names": ["-h", "--help"]},
             cls=argv_command(GEPA_RUN))
@user_errors
@options.field_flags(GEPA_FLAGS)
def run(
    ctx: typer.Context,
    env_or_config: str = typer.Argument(None, show_default=False, help=ENV_OR_CONFIG_HELP),
    stray: str = typer.Argument(None, hidden=True),
    sampling_args: options.SamplingArgs = None,
    env_args: options.EnvArgs = None,
    extra_env_kwargs: options.ExtraEnvKwargs = None,
    list_components: bool = typer.Option(
        False,
        "--list-components",
        help="Print the components the environment offers to --components (with their seed text) and exit.",
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="Print the plan (envs, models, splits, budget arithmetic) and exit; no model is loaded.",
    ),
    resume: str = typer.Option(
        None,
        "--resume",
        metavar="[RUN_DIR]",
        show_default=False,
        help="Continue a killed run: RUN_DIR, or no value for the newest run of this env+model.",
    ),
    verbose: bool = typer.Option(False, "-v", "--verbose", help="Print the optimizer's log lines too."),
    given: dict[str, Any] | None = None,
) -> None:
    """Optimize the system prompt with reflection and a Pareto frontier over validation examples.

    Every task-model rollout counts against -B (the seed's validation pass included; teacher
    calls are counted separately). Writes system_prompt.txt (best by mean validation score),
    results.jsonl, pareto_frontier.jsonl and metadata.json in verifiers' schema, plus gepa.log
    and budget.json, to the run directory.
    """
    from rich.console import Console

    from gepa_cli.runner import run_gepa

    fields = dict(given or {})
    env_file = fields.pop("env_file", None) or []
    shortcuts = TrackingShortcuts(**{key: fields.pop(key) for key in TrackingShortcuts.model_fields if key in fields})
    if sampling_args is not None:
        fields["sampling"] = parse_json_object(sampling_args, "-S/--sampling-args")
    fields.update(shortcuts.tables())
    request = _resume_request(env_or_config, stray, resume)
    env_files = [str(Path(path).expanduser().resolve()) for path in env_file]
    config, resolved = _config_and_run_dir(request, fields, env_files, env_or_config, env_args, extra_env_kwargs,
                                           dialect_args(ctx))
    load_env_files(config.env_file, apply=not dry_run)
    if list_components:
        return _list_components(config)
    console = Console(stderr=True)
    outcome = run_gepa(config, resume=resolved, console=console, verbose=verbose, dry_run=dry_run)
    if outcome is not None:
        _print_summary(outcome, config)


def _list_components(config: Any) -> None:
    """``--list-components``: what the environments offer to ``--components``, with the seed texts."""
    from gepa_cli.components import listing
    from gepa_cli.runner import load_envs

    for line in listing(load_envs(config), [spec.id for spec in config.envs]):
        typer.echo(line)


def _config_and_run_dir(request: runs.ResumeRequest, given: dict[str, Any], env_files: list[str],
                        env_or_config: str | None, env_args: str | None,
                        extra_env_kwargs: str | None, dialect: Any = None) -> tuple[Any, runs.ResolvedRun]:
    """The job config and its run dir. A resumed run's config is the one it saved, with the flags
    given now laid over it (and refused when they change what a resume must keep); ``--env-file``
    files add to the config's ``env_file`` list."""
    from gepa_cli.config import build_job_config
    from gepa_cli.runner import run_dirs, saved_config

    def laid_over(base: dict[str, Any]) -> dict[str, Any]:
        files = list(dict.fromkeys([*base.get("env_file", []), *env_files]))
        tables = {t: {**(base.get(t) or {}), **given[t]} for t in ("wandb", "mlflow") if t in given}
        return {**base, **given, **tables, **({"env_file": files} if files else {})}

    config = None
    named = env_or_config is not None and not runs.has_metadata(Path(env_or_config))  # not the run dir itself
    if request.run_dir is None or named:  # the config says where this env+model's runs are (and what it ran)
        fields, source = _base_fields(env_or_config, env_args, extra_env_kwargs, dialect)
        config = build_job_config(laid_over(fields), source)
    resolved = runs.resolve_run(run_dirs(config), request)
    if resolved.resuming or config is None:
        saved = _with_headers_restored(_with_secrets_restored(saved_config(resolved), config, resolved.run_dir),
                                       config, resolved.run_dir)
        _check_resume_unchanged(saved, {**saved, **given})
        config = build_job_config(laid_over(saved), f"{resolved.run_dir}/{runs.METADATA}")
    return config, resolved


def _with_secrets_restored(saved: dict[str, Any], now: Any, run_dir: Path) -> dict[str, Any]:
    """The saved config with the env args it had to save redacted (an ``--env-file`` value) taken from the
    config given now, when that config redacts to exactly what was saved. Without it the run would go on with
    ``[redacted]`` as an argument, a different environment from the one its frontier was scored on."""
    from evalkit.core.redact import REDACTED, redact
    from gepa_cli.config import EnvSpec

    saved_envs = json.dumps(saved.get("envs") or [], sort_keys=True)
    if REDACTED not in saved_envs:
        return saved
    hint = (f"resume it with the config or env args that started it and their --env-file: "
            f"prime gepa run CONFIG_OR_ENV [-a ...] --env-file FILE --resume {run_dir}")
    if now is None:
        raise UserError(f"--resume: {run_dir} was started with a secret in its env args (saved as {REDACTED}); {hint}")
    load_env_files(now.env_file, apply=False, warn=False)  # registers the values, so they redact as they did then
    given_envs = [EnvSpec(**spec).model_dump(mode="json") for spec in now.model_dump(mode="json")["envs"]]
    saved_specs = [EnvSpec(**spec).model_dump(mode="json") for spec in saved.get("envs") or []]
    if redact(json.dumps(given_envs, sort_keys=True)) != json.dumps(saved_specs, sort_keys=True):
        raise UserError(f"--resume: the env args given differ from those {run_dir} was started with "
                        f"(one held a secret, saved as {REDACTED}); {hint}")
    return {**saved, "envs": given_envs}


def _with_headers_restored(saved: dict[str, Any], now: Any, run_dir: Path) -> dict[str, Any]:
    """The saved config with its header values (saved as ``[redacted]``: every configured header value is a
    secret) taken from the config given now, when that config's headers redact to exactly what was saved;
    otherwise the resumed run would send ``[redacted]`` to the server."""
    from evalkit.core.redact import REDACTED, redact

    saved_headers = saved.get("headers") or {}
    if REDACTED not in json.dumps(saved_headers):
        return saved
    hint = f"resume it with the config that started it: prime gepa run CONFIG --resume {run_dir}"
    if now is None or redact(json.dumps(now.headers, sort_keys=True)) != json.dumps(saved_headers, sort_keys=True):
        raise UserError(f"--resume: {run_dir} was started with header values that were saved as {REDACTED}; {hint}")
    return {**saved, "headers": dict(now.headers)}


def _base_fields(env_or_config: str | None, env_args: str | None, extra_env_kwargs: str | None,
                 dialect: Any = None) -> tuple[dict[str, Any], str]:
    """Fields from the TOML, a verifiers 0.4 run config, or the env id (and where they came from); flags are laid
    over them."""
    from gepa_cli.config import load_gepa_toml, toml_to_job_fields

    if dialect is not None:
        env_or_config, dialect = plain_file(env_or_config, dialect)
    if dialect is not None and wants_dialect(env_or_config, dialect):
        for flag, value in (("-a/--env-args", env_args), ("-x/--extra-env-kwargs", extra_env_kwargs)):
            if value is not None:
                raise UserError(f"{flag} cannot be combined with a verifiers run config; use --env.taskset.KEY VALUE")
        return gepa_fields(env_or_config, dialect), "verifiers run config"

    if env_or_config is None:
        raise UserError("give an environment id or a GEPA TOML config (or --resume RUN_DIR to continue a run)")
    if env_or_config.endswith(".toml"):
        parsed, base_dir = load_gepa_toml(env_or_config)
        fields = toml_to_job_fields(parsed, base_dir)
        for flag, value in (("-a/--env-args", env_args), ("-x/--extra-env-kwargs", extra_env_kwargs)):
            if value is not None:
                raise _conflict(flag, env_or_config)
        return fields, env_or_config
    extra = parse_json_object(extra_env_kwargs, "-x/--extra-env-kwargs")
    return {
        "envs": [{"id": env_or_config, "args": parse_env_args(env_args), "extra_env_kwargs": extra}]
    }, "command line"


RESUME_FIXED = ("envs", "model", "num_train", "num_val", "minibatch_size", "seed", "sampling", *SEARCH_RESUME_FIXED)
"""What a resumed run must keep: changing it would mix incomparable scores in one frontier."""


def _check_resume_unchanged(saved: dict[str, Any], fields: dict[str, Any]) -> None:
    from gepa_cli.config import EnvSpec

    # environments compare by their full spec (runs saved before a field existed have its default)
    saved, fields = (
        {**d, "envs": [EnvSpec(**e).model_dump() for e in d["envs"]]} if "envs" in d else d for d in (saved, fields)
    )
    changed = runs.mismatches(saved, fields, [key for key in RESUME_FIXED if key in fields and key in saved])
    if changed:
        raise UserError(
            f"--resume cannot change {', '.join(changed)} "
            f"(the saved run used {', '.join(f'{k}={saved[k]!r}' for k in changed)}); "
            "start a new run instead"
        )


def _resume_request(env_or_config: str | None, stray: str | None, resume: str | None) -> runs.ResumeRequest:
    """What ``--resume`` asks for: a run dir, the newest run of this env+model, or nothing (a new run).

    ``--resume RUN_DIR`` gets the folder as its value (see :mod:`primekit_cli.argv`); a path
    that is not a folder lands after the positional instead and is still taken as the run to resume
    (so the error names it). Without ``--resume`` a second positional is a mistake.
    """
    if resume is None:
        if stray is not None:
            raise UserError(f"unexpected extra argument '{stray}'; to continue a run use --resume {stray}")
        return runs.ResumeRequest()
    if resume != runs.LATEST:
        return runs.ResumeRequest.parse(resume)
    if stray is not None:
        return runs.ResumeRequest.parse(stray)
    if env_or_config is not None and runs.has_metadata(Path(env_or_config)):
        return runs.ResumeRequest.parse(env_or_config)
    return runs.ResumeRequest(resume=True)


def _conflict(flag: str, source: str) -> Exception:
    return UserError(f"{flag} cannot be combined with a TOML config; set args in {source}'s [[env]] table")


def _print_summary(outcome: Any, config: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    from gepa_cli.runner import verify_command

    console = Console()
    table = Table(title=f"GEPA · {config.env_label} · {config.model}", show_header=False)
    table.add_column("what", no_wrap=True)
    table.add_column("value", overflow="fold")
    table.add_row("status", outcome.status)
    table.add_row("seed val score", f"{outcome.seed_val_score:.3f}")
    table.add_row(
        "best score", f"{outcome.best_val_score:.3f} (candidate {outcome.best_idx} of {outcome.num_candidates})"
    )
    table.add_row("rollouts", f"{outcome.total_metric_calls} / {config.max_calls}")
    table.add_row("reflection calls", str(outcome.num_reflection_calls))
    table.add_row("time", f"{outcome.duration_s:.1f} s")
    table.add_row("run dir", str(outcome.run_dir))
    console.print(table)
    from evalkit.report.gepa_data import load_gepa_run
    from evalkit.report.paired import summary_line
    from evalkit.report.paired_view import gepa_comparisons

    for seed, best, paired in gepa_comparisons(load_gepa_run(Path(outcome.run_dir))):
        console.print(summary_line(paired, seed, best), soft_wrap=True)
    console.print("Verify the prompt:")
    console.print(verify_command(config, outcome.run_dir), markup=False, highlight=False, soft_wrap=True)
