"""`prime eval run|view`: thin wrappers that build an EvalConfig and call the eval runner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from evalkit.clients.providers import PROVIDER_CHOICES
from evalkit.eval.config import EvalConfig
from primekit_cli import options
from primekit_cli.argv import EVAL_RUN, EVAL_VIEW, HTML_FLAG, LATEST, argv_command
from primekit_cli.commands.model_help import MODELS_EPILOG
from primekit_cli.compat_flags import EVAL_NOOPS, EVAL_REFUSED, help_section
from primekit_cli.errors import user_errors

app = typer.Typer(help="Score a model on an environment.", no_args_is_help=True)

RUN_EPILOG = """
Examples:

  prime eval run reverse-text                         # embedded local/smollm2-135m, 5 examples x 3 rollouts

  prime eval run reverse-text -m gpt-4.1-mini -n 50   # OpenAI (key in $OPENAI_API_KEY)

  prime eval run reverse-text -m litellm/anthropic/claude-sonnet-4-5   # any provider litellm speaks

  prime eval run wordle -m qwen3-8b -c 64             # endpoint id from configs/endpoints.toml

  prime eval run reverse-text -m Qwen/Qwen3-8B -b http://localhost:8000/v1 -S '{"temperature": 0.7}'

  prime eval run configs/eval/reverse-text.toml       # one or more [[eval]] entries

  prime eval run @ alphabet_sort.toml --dry-run        # a verifiers 0.4 run config: the resolved plan, no model call

  prime eval run my-taskset --sampling.temperature 0.5 --env.taskset.split train   # verifiers' dotted overrides

  prime eval run reverse-text --system-prompt-file outputs/gepa/.../system_prompt.txt

  prime eval run reverse-text -n 200 -R               # continue the newest incomplete matching run

  prime eval run arithmetic -m outputs/rl/my-run/weights --steps all   # every kept checkpoint + the starting model

Errors: a rollout whose model call, environment code or scoring failed is a row with `error` and
`error_kind` (model, environment, timeout) and no score: it is left out of the reward numbers and
counted under errors. A raising reward function scores 0 for that function (`error_kind` reward) and
the row is still scored. A run with any error ends `complete_with_errors`; when every rollout
errored the command prints the first error and exits 1. `-R` runs errored rollouts without a score
again (--no-retry-errors keeps them).
""" + MODELS_EPILOG

ENV_OR_CONFIG_HELP = (
    "Environment id (or folder), an eval TOML config ([[eval]] tables), or a verifiers 0.4 run config "
    "(config.toml or @ config.toml; dotted overrides such as --sampling.temperature 0.5)."
)
STEPS_HELP = (
    "With -m RUN/weights (an RL run's weight exports): evaluate the checkpoints of these steps, 'all' or "
    "'10,20,...', one run dir per step (resumable); `prime eval view --html` on the sweep plots reward by step."
)
RUN_EPILOG += help_section(EVAL_REFUSED, EVAL_NOOPS)


EVAL_FLAGS = options.FlagTable(
    EvalConfig,
    options.MODEL, options.BASE_URL, options.API_KEY_VAR,
    options.flag("provider", "-p", extra=f"One of: {', '.join(PROVIDER_CHOICES)}; -b/-k win."),
    options.flag("api_client_type"),
    "header",
    options.ENDPOINTS_PATH,
    options.flag("num_examples", "-n"),
    options.flag("rollouts_per_example", "-r"),
    options.MAX_CONCURRENT,
    "max_tokens", "temperature", "sampling_args", "env_args", "extra_env_kwargs",
    options.flag("env_dir_path"),
    options.flag("system_prompt"),
    "system_prompt_file", "tools_file",
    options.flag("shuffle"),
    options.flag("seed", "--shuffle-seed", "--seed"),
    options.flag("output_dir", "-o"),
    options.flag("resume", "-R", metavar="[RUN_DIR]"),
    "save_results",
    options.flag("independent_scoring", "-i", negatable=False),
    options.MAX_RETRIES, options.TIMEOUT,
    options.flag("state_columns", "-C", cli=str, extra="Comma-separated."),
    options.flag("pass_threshold"),
    options.SCORE_TIMEOUT, options.ROLLOUT_TIMEOUT, options.MAX_MESSAGE_CHARS,
    options.flag("retry_errors"),
    options.DEVICE, options.ENV_FILE,
    "steps", "verbose", "dry_run",
)
"""``prime eval run``'s options in ``--help`` order: the field flags, and where the hand-written ones go."""


@app.command("run", epilog=RUN_EPILOG, context_settings={"help_option_names": ["-h", "--help"]},
             cls=argv_command(EVAL_RUN))
@user_errors
@options.field_flags(EVAL_FLAGS)
def run(
    ctx: typer.Context,
    env_or_config: str = typer.Argument(None, show_default=False, help=ENV_OR_CONFIG_HELP),
    header: list[str] = typer.Option(
        None, "--header", help="Extra HTTP header 'Name: Value' on every request; repeatable."
    ),
    max_tokens: int = typer.Option(
        None, "--max-tokens", "-t", help="Max tokens per model reply (-S's max_tokens wins)."
    ),
    temperature: float = typer.Option(
        None, "--temperature", "-T", help="Sampling temperature (-S's temperature wins)."
    ),
    sampling_args: options.SamplingArgs = None,
    env_args: options.EnvArgs = None,
    extra_env_kwargs: options.ExtraEnvKwargs = None,
    system_prompt_file: Path = typer.Option(
        None, "--system-prompt-file", help="Read the system prompt from a file (e.g. a GEPA result)."
    ),
    tools_file: Path = typer.Option(
        None,
        "--tools-file",
        help="Replace the tools' descriptions with a JSON object {name: description} (e.g. a GEPA run's tools.json).",
    ),
    save_results: bool = typer.Option(
        False, "--save-results", "-s", help="Accepted for vf-eval: results are always saved."
    ),
    steps: str = typer.Option(None, "--steps", help=STEPS_HELP),
    verbose: options.Verbose = False,
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print the resolved run(s) as JSON and exit 0; no model is called."
    ),
    given: dict[str, Any] | None = None,
) -> None:
    """Run a model on an environment: rollouts, rewards, a summary, and a run dir with results.jsonl + metadata.json.

    Exit codes: 0 when the run finished (check the errors line: failed rollouts are rows, not
    crashes), 1 when every rollout errored, 2 for bad input, 130/143 when interrupted (resume with -R).
    """
    if verbose:
        _enable_verbose_logging()
    overrides = dict(given or {})
    env_file = overrides.pop("env_file", None)
    system_prompt = _system_prompt_flag(overrides.pop("system_prompt", None), system_prompt_file)
    if system_prompt is not None:
        overrides["system_prompt"] = system_prompt
    overrides.update(_json_overrides(sampling_args, max_tokens, temperature, env_args, extra_env_kwargs, header))
    if tools_file is not None:
        from evalkit.envs.tool_descriptions import read_tools_file

        overrides["tool_descriptions"] = read_tools_file(tools_file)
    configs, plan = _configs(env_or_config, overrides, ctx)
    if dry_run:
        from primekit_cli.dialect.plans import print_eval_plan

        return print_eval_plan(configs, plan)
    _load_secrets(configs, env_file)
    _run_all(configs, plan, steps, None if plan is not None else env_or_config, overrides.get("resume"))


def _run_all(configs: list[Any], plan: Any, steps: str | None, env_or_config: str | None, resume: str | None) -> None:
    """Each eval (or the checkpoint sweep) with its summary; exit 1 when every rollout of one errored."""
    from rich.console import Console

    console = Console(highlight=False)
    failed: list[str] = []
    try:
        if steps is not None:
            failed = _run_sweep(configs, steps, env_or_config, resume, console)
        else:
            failed = [failure for config in configs if (failure := _run_one(config, console, plan)) is not None]
    finally:
        _close_embedded_engines()
    if failed:
        _exit_all_errored(failed)


def _system_prompt_flag(text: str | None, path: Path | None) -> str | None:
    """``--system-prompt`` or the text of ``--system-prompt-file`` (one of them, or neither)."""
    from evalkit.core.errors import UserError

    if text is not None and path is not None:
        raise UserError("pass --system-prompt or --system-prompt-file, not both")
    if path is None:
        return text
    from evalkit.core.fileio import read_user_text

    return read_user_text(path, "--system-prompt-file")


def _run_sweep(configs: list[Any], steps: str, env_or_config: str, resume: str | None, console: Any) -> list[str]:
    """One eval per checkpoint step (and the starting model as step 0), then the reward by step."""
    from rich.table import Table
    from rich.text import Text

    from evalkit.core.errors import UserError
    from evalkit.core.runs import read_metadata, step_dir
    from evalkit.eval.sweep import load_problem, plan_sweep, record, step_configs

    if env_or_config is None or env_or_config.endswith(".toml") or resume is not None:
        raise UserError("--steps takes an environment id (not a TOML config) and resumes by itself (drop -R)")
    config = configs[0]
    sweep = plan_sweep(config.model, steps, config.env_id, config.output_dir)
    record(sweep, config)
    console.print(
        f"sweep of {len(sweep.steps)} steps ({', '.join(map(str, sweep.steps))}) into {sweep.folder}", soft_wrap=True
    )
    failed = []
    for step, step_config in step_configs(config, sweep):
        console.rule(f"step {step}" + (" (starting model)" if step == 0 else ""))
        problem = load_problem(step_config)
        if problem is not None:  # one line, and on to the next step
            console.print(
                Text("warning: ", style="yellow") + Text(f"step {step} skipped: its model does not load: {problem}"),
                soft_wrap=True,
            )
            continue
        failure = _run_one(step_config, console)
        if failure is not None:
            failed.append(f"step {step}: {failure}")
    table = Table(title=f"{config.env_id} by step")
    for column in ("step", "model", "avg reward"):
        table.add_column(column)
    for step in sweep.steps:
        meta = read_metadata(step_dir(sweep.folder, step)) or {}
        reward = meta.get("avg_reward")
        table.add_row(str(step), sweep.model_of(step), f"{reward:.3f}" if isinstance(reward, (int, float)) else "-")
    console.print(table)
    console.print(f"report: prime eval view --html {sweep.folder}", soft_wrap=True)
    return failed


def _load_secrets(configs: list[Any], cli_files: list[str] | None) -> None:
    """The configs' ``env_file`` and ``--env-file`` files, loaded once into this process's environment."""
    from evalkit.core.secrets_file import load_env_files

    extra = [str(Path(path).expanduser().resolve()) for path in cli_files or []]
    for config in configs:
        config.env_file = [*config.env_file, *extra]
    load_env_files(path for config in configs for path in config.env_file)


def _configs(env_or_config: str | None, overrides: dict[str, Any], ctx: Any) -> tuple[list[Any], Any]:
    """One EvalConfig per ``[[eval]]`` of a TOML file, or one for an environment id, or one for a verifiers 0.4 run
    config (``@ file``, dotted flags: :mod:`primekit_cli.dialect.plans`, which also returns its plan); flags win."""
    from evalkit.core.errors import UserError
    from evalkit.core.tomlio import validate
    from evalkit.eval.config import EvalConfig, load_eval_file
    from primekit_cli.argv import dialect_args
    from primekit_cli.dialect import any_env
    from primekit_cli.dialect.args import DialectArgs
    from primekit_cli.dialect.plans import eval_configs, plain_file, wants_dialect

    env_or_config, dialect = plain_file(env_or_config, dialect_args(ctx))
    if dialect.overrides and any_env.applies(env_or_config, dialect.files, overrides.get("env_dir_path",
                                                                                              "environments")):
        overrides = any_env.laid_under(any_env.fields(str(env_or_config), dialect.overrides), overrides)
        dialect = DialectArgs()
    if wants_dialect(env_or_config, dialect):
        return eval_configs(env_or_config, dialect, overrides)
    if env_or_config is None:
        raise UserError("give an environment id or a config: prime eval run ENV, prime eval run config.toml, "
                        "or prime eval run @ config.toml")
    if env_or_config.endswith(".toml"):
        if "resume" in overrides and overrides["resume"] != LATEST:
            raise UserError("with a TOML config, use -R without a value (each [[eval]] resumes its own newest run)")
        return load_eval_file(env_or_config, overrides), None
    return [validate(EvalConfig, {"env_id": env_or_config, **overrides}, "command line")], None


def _json_overrides(sampling_args: str | None, max_tokens: int | None, temperature: float | None, env_args: str | None,
                    extra_env_kwargs: str | None, header: list[str] | None) -> dict[str, Any]:
    """-S (whose keys win over -t/-T, as in vf-eval), -a, -x and --header as config fields."""
    from evalkit.clients.providers import parse_headers
    from evalkit.core.json_args import parse_json_object
    from evalkit.loading.resolve import parse_env_args

    loose = {
        key: value for key, value in (("max_tokens", max_tokens), ("temperature", temperature)) if value is not None
    }
    sampling = {**loose, **parse_json_object(sampling_args, "--sampling-args")}
    found: dict[str, Any] = {"sampling": sampling} if sampling else {}
    if env_args:
        found["env_args"] = parse_env_args(env_args)
    if extra_env_kwargs:
        found["extra_env_kwargs"] = parse_json_object(extra_env_kwargs, "-x/--extra-env-kwargs")
    if header:
        found["headers"] = parse_headers(header)
    return found


def _enable_verbose_logging() -> None:
    """Retries and request problems from the evalkit loggers to stderr, scrubbed of keys and auth headers."""
    import logging
    import sys

    from evalkit.core.redact import RedactingFilter

    log = logging.getLogger("evalkit")
    for old in [h for h in log.handlers if getattr(h, "primekit_verbose", False)]:
        log.removeHandler(old)
    handler = logging.StreamHandler(sys.stderr)
    handler.primekit_verbose = True  # type: ignore[attr-defined]
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactingFilter())
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)


def _close_embedded_engines() -> None:
    """Stop the embedded engine's threads before the interpreter exits (else torch may abort at exit)."""
    import sys

    shared = sys.modules.get("evalkit.model.shared")
    if shared is not None:
        shared.shutdown_engines()


def _exit_all_errored(failed: list[str]) -> None:
    """Print one ``error:`` line per eval whose every rollout errored, then exit 1."""
    import sys

    import typer

    from evalkit.core.redact import redact

    for line in failed:
        print(f"error: {redact(line)}", file=sys.stderr, flush=True)
    raise typer.Exit(code=1)


def _run_one(config: Any, console: Any, plan: Any = None) -> str | None:
    """Run one eval and print its summary; returns the failure line when every rollout errored. A run from a
    verifiers run config (``plan``) also gets verifiers' config files and eval log in its run dir."""
    from contextlib import nullcontext

    from rich.text import Text

    from evalkit.eval.runner import run_eval
    from evalkit.eval.summary import diversity_line, error_lines, summary_table

    if plan is not None:
        from primekit_cli.dialect.outputs import RunLog, write_layout
    with RunLog(plan.notes) if plan is not None else nullcontext() as log:
        result = run_eval(config, console=console)
    if plan is not None:
        write_layout(
            result.run_dir,
            plan,
            log,
            f"status: {result.metadata.get('status')}, "
            f"{len(result.rows)} rows, avg reward {result.summary.get('avg_reward')}",
        )
    title = f"{config.env_id} · {config.model_label}"
    console.print(summary_table(result.summary, duration_s=result.duration_s, title=title))
    console.print(diversity_line(result.summary))
    for line in error_lines(result.rows):
        console.print(Text("error ", style="red") + Text(line))
    status = result.metadata.get("status")
    if status != "complete":
        console.print(f"status: [yellow]{status}[/yellow]")
    if result.resumed_rows:
        console.print(f"{result.resumed_rows} rollouts were already done; ran {len(result.states)} more")
    console.print(f"results: [bold]{result.run_dir}[/bold]", soft_wrap=True)
    if result.all_errored:
        first = " ".join(str(result.first_error).split())[:500]
        return (f"every rollout of {config.env_id} errored ({len(result.rows)}/{len(result.rows)}); "
                f"first error: {first}")
    return None


VIEW_EPILOG = """
Examples:

  prime eval view                                      # the newest eval run, as text

  prime eval view outputs/evals/reverse-text--local--smollm2-135m/20260101-120000-ab12cd --html

  prime eval view RUN_A RUN_B --html compare.html      # two eval runs side by side, example by example

  prime eval view outputs/gepa/arithmetic--local--smollm2-135m/20260101-120000 --html

  prime eval view outputs/rl/my-run --html             # reward, loss, entropy, KL, evals, step times

  prime eval view outputs/rl/my-run/sweeps/arithmetic --html   # a checkpoint sweep: reward by step vs the start

--html writes one self-contained HTML file (no network needed to open it) and prints its path:
RUN_DIR/report.html for one run, FIRST_RUN_DIR/compare.html for several, or the FILE.html given.
"""


@app.command("view", epilog=VIEW_EPILOG, cls=argv_command(EVAL_VIEW))
@user_errors
def view(
    run_dirs: list[str] = typer.Argument(
        None,
        metavar="RUN_DIR",
        help=(
            "Eval, GEPA or RL run dirs or checkpoint sweeps (several of one kind side by side). "
            "Default: the newest eval run."
        ),
    ),
    output_dir: str = typer.Option(
        None,
        "--output-dir",
        "-o",
        help="Where to look for the newest run. [default: ./outputs and environments/*/outputs]",
    ),
    samples: int = typer.Option(3, "--samples", "-s", help="How many sample rollouts to print per eval run."),
    html: str = typer.Option(
        None,
        HTML_FLAG,
        metavar="[FILE.html]",
        help="Also write a self-contained HTML report (charts, sortable tables, every rollout) and print its path.",
    ),
) -> None:
    """Report of runs: eval (summary, samples), GEPA (candidates, frontier, prompt diff) or RL (steps, evals); --html
    for a web page."""
    from rich.console import Console

    from evalkit.core.runs import require_kind, require_one_kind
    from evalkit.report.eval_text import render_report, resolve_run_dir

    console = Console(highlight=False)
    paths = [resolve_run_dir(None, output_dir)] if not run_dirs else [Path(p) for p in run_dirs]
    kinds = [require_kind(path) for path in paths]
    if html is not None:
        require_one_kind(paths)  # refuse before printing anything
    _print_text_reports(paths, kinds, console, samples, render_report)
    if html is not None:
        from evalkit.report.html import write_report

        target = write_report(paths, None if html == LATEST else Path(html))
        console.print(f"html report: [bold]{target}[/bold]", soft_wrap=True)


def _print_text_reports(paths: list[Path], kinds: list[str], console: Any, samples: int, render_eval: Any) -> None:
    from evalkit.report import terminal

    evals = []
    for path, kind in zip(paths, kinds):
        if kind == "gepa":
            from evalkit.report.gepa_data import load_gepa_run

            terminal.render_gepa(load_gepa_run(path), console)
        elif kind == "rl":
            from evalkit.report.rl_data import load_rl_run

            terminal.render_rl(load_rl_run(path), console)
        elif kind == "sft":
            from evalkit.report.rl_data import load_rl_run

            terminal.render_sft(load_rl_run(path), console)
        elif kind == "sweep":
            from evalkit.report.sweep_data import load_sweep

            terminal.render_sweep(load_sweep(path), console)
        else:
            render_eval(path, console, samples=samples)
            evals.append(path)
    if len(evals) > 1:
        from evalkit.report.eval_data import load_eval_run
        from evalkit.report.paired_view import print_paired

        loaded = [load_eval_run(path, str(path.name)) for path in evals]
        console.print(terminal.comparison_table(loaded))
        print_paired(loaded, console)


TUI_EPILOG = """
Keys: runs list: up/down, enter opens, r reloads, q quits. A run: enter opens a rollout, f filters by reward
(>=0.5, <1, 0.2..0.8, =0, err), s sorts by reward, escape goes back. A rollout: n / p next / previous, escape back.

Example:

  prime eval tui -o outputs
"""


@app.command("tui", epilog=TUI_EPILOG)
@user_errors
def tui(
    output_dir: str = typer.Option(
        "outputs", "--output-dir", "-o", help="Folder whose evals/, gepa/ and rl/ runs are listed."
    ),
) -> None:
    """Browse runs and rollouts in the terminal: list runs, open one, page through rollouts, filter by reward."""
    from evalkit.core.errors import UserError

    if not Path(output_dir).is_dir():
        raise UserError(f"{output_dir} does not exist; run `prime eval run ENV` first or pass -o OUTPUT_DIR")
    from evalkit.report.tui import RunsBrowser

    browser = RunsBrowser(output_dir)
    browser.run()
    if browser.return_code:  # it crashed (Textual printed the traceback): never exit 0
        raise typer.Exit(code=browser.return_code)

