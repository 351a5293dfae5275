"""`prime rl run` (baseline checks, then RL fine-tuning here or by prime-rl) and `prime rl export` (the same
run for prime-rl, Tinker or SkyRL)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from evalkit.core.errors import UserError
from evalkit.core.runs import WEIGHTS_DIR, ResumeRequest, step_dir, step_numbers
from primekit_cli import options
from primekit_cli.argv import RL_RUN, argv_command
from primekit_cli.errors import user_errors
from rl_backend.config import RLConfig

app = typer.Typer(help="Baseline checks, then RL fine-tuning.", no_args_is_help=True)

RUN_HELP = """Check the baseline, then train the model on the environment (LoRA by default).

Examples:

    prime rl run configs/rl/arithmetic.toml

    prime rl run configs/rl/arithmetic.toml --dry-run

    prime rl run configs/rl/arithmetic.toml --max-steps 5 --trainer.lr 1e-4 --run-name try1

    prime rl run configs/rl/arithmetic.toml --run-name try1 --resume

    prime rl run configs/rl/arithmetic.toml --resume 20            # from checkpoint step 20

    prime rl run configs/rl/arithmetic.toml --resume outputs/rl/arithmetic-20260101-120000

    prime rl run configs/rl/qwen-3-5.toml --env-file secrets.env  # judge keys for the run, never written

More than one machine: `--backend prime-rl` runs the baseline checks here, then hands the same config to
prime-rl (written to RUN_DIR/prime-rl.toml, launched with `--prime-rl-cmd` or `rl` on PATH);
`prime rl export` writes that config (or a Tinker / SkyRL command) without running anything.

Any config key can be overridden with a dotted flag (`--trainer.loss.type clip`, `--sampling.max_tokens 64`).

`max_concurrent` bounds the rollouts in flight at once: one bound shared by all the run's environments,
as `-c` is in `prime eval run` and `prime gepa run`.

Configs written for hosted training, prime-rl (its single-file shape: [model] name, [trainer.optim],
[orchestrator] ...), verifiers' vf-rl ([trainer.args]) and the self-hosted quick start (model_name, num_gpus,
learning_rate) are read too: keys that mean the same are mapped (README: "Configs from other trainers"), keys
with no effect here are listed as notes in the plan, and the rest is refused by name.

Outputs go to OUTPUT_DIR/rl/RUN_NAME/: config.resolved.toml, baseline.json, metrics.jsonl, rollouts/,
checkpoints/step_N/ and weights/step_N/ (a merged model for `prime eval run -m`); the baseline checks and
periodic evals are eval run dirs in baseline/ and evals/step_N/ (`prime eval view` reads them).
"""


RL_FLAGS = options.FlagTable(RLConfig, "dry_run", "resume", "skip_baseline", "output_dir", options.TRAINER_DEVICE,
                             options.ENV_FILE, "backend", "halt_on", "prime_rl_cmd")
"""``prime rl run``'s options: the trainer's device and the secrets files are field flags; the rest of the config
takes dotted flags."""


@app.command(
    "run",
    help=RUN_HELP,
    cls=argv_command(RL_RUN),
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
@user_errors
@options.field_flags(RL_FLAGS)
def run(
    ctx: typer.Context,
    config: Path = typer.Argument(..., help="An RL TOML config (see configs/rl/)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the resolved config and the plan, then exit."),
    resume: str = typer.Option(
        None,
        "--resume",
        metavar="[STEP|RUN_DIR]",
        show_default=False,
        help="Continue a run: no value for the newest checkpoint of the config's run, STEP for that checkpoint, "
        "or RUN_DIR (its newest checkpoint).",
    ),
    skip_baseline: bool = typer.Option(
        False, "--skip-baseline", help="Train even when the baseline checks would refuse."
    ),
    output_dir: Path = typer.Option(Path("outputs"), "--output-dir", "-o", help="Where run folders go."),
    backend: str = typer.Option(
        "primekit",
        "--backend",
        metavar="primekit|prime-rl",
        help="Who trains: primekit in this process, or prime-rl (after the baseline checks here). Who samples is "
        "the config's inference.backend.",
    ),
    halt_on: str = typer.Option(
        None,
        "--halt-on",
        metavar="ALARM[,ALARM]",
        help="Stop the run, checkpoint and metrics saved, on these health alarms: reward_spread, entropy_collapse, "
        "kl_growth, truncation_rising, errors_rising, reward_drop, or all (the config's health.halt_on).",
    ),
    prime_rl_cmd: str = typer.Option(
        None,
        "--prime-rl-cmd",
        metavar="COMMAND",
        help="--backend prime-rl: the command that runs prime-rl's `rl`, e.g. 'uv run --project ~/prime-rl rl' "
        "[default: rl on PATH]",
    ),
    given: dict[str, Any] | None = None,
) -> None:
    from evalkit.core.secrets_file import load_env_files
    from rl_backend.config import load_rl_config
    from rl_backend.runner import run as run_rl

    given = given or {}
    overrides = list(ctx.args) + options.trainer_overrides(given)
    overrides += ["--health.halt_on", _toml_names(halt_on)] if halt_on is not None else []
    cfg = load_rl_config(config, overrides)
    cfg.env_file = [*cfg.env_file, *(str(Path(p).expanduser().resolve()) for p in given.get("env_file", []))]
    load_env_files(cfg.env_file, apply=not dry_run)  # prime-rl, run from here, inherits them too
    if backend not in ("primekit", "prime-rl"):
        raise UserError(f"--backend '{backend}' is unknown; use primekit (this process) or prime-rl")
    if backend == "prime-rl" or prime_rl_cmd is not None:
        _run_prime_rl(cfg, backend, resume, output_dir, prime_rl_cmd, skip_baseline, dry_run)
        return
    summary = run_rl(
        cfg,
        output_dir=output_dir,
        resume=ResumeRequest.parse(resume, steps=True),
        skip_baseline=skip_baseline,
        dry_run=dry_run,
    )
    if summary is None:
        return
    from rich.console import Console

    last = summary.last_metrics
    console = Console()
    console.print(f"[bold]done[/bold]: {summary.steps_done} steps in {summary.run_dir}", soft_wrap=True)
    if last:
        console.print(f"  last step: reward {last['reward_mean']:.3f}, loss {last['loss']:+.5f}")
    for step, reward in sorted(summary.eval_rewards.items()):
        console.print(f"  eval step {step}: mean reward {reward:.3f}")
    exported = step_numbers(summary.run_dir / WEIGHTS_DIR)
    if exported:
        last_weights = step_dir(summary.run_dir / WEIGHTS_DIR, exported[-1])
        console.print(f"  weights: {last_weights}  (prime eval run ENV -m {last_weights})")


def _toml_names(names: str) -> str:
    """``a,b`` -> the TOML array ``["a", "b"]`` (names are checked by the config)."""
    import json

    return json.dumps([part.strip() for part in names.split(",") if part.strip()])


def _run_prime_rl(cfg: RLConfig, backend: str, resume: str | None, output_dir: Path, prime_rl_cmd: str | None,
                  skip_baseline: bool, dry_run: bool) -> None:
    from rich.console import Console

    from rl_backend.handoff import run as handoff

    if backend != "prime-rl":
        raise UserError("--prime-rl-cmd is for --backend prime-rl")
    if resume is not None:
        raise UserError("--resume is primekit's; a prime-rl run resumes with prime-rl's own [resume] (see its docs)")
    code = handoff(cfg, output_dir=output_dir, prime_rl_cmd=prime_rl_cmd, skip_baseline=skip_baseline, dry_run=dry_run,
                   console=Console(stderr=True))
    if code:
        raise typer.Exit(code)


EXPORT_VERSIONS = {"prime-rl": "v0.8.1.dev67", "tinker": "v0.5.5", "skyrl": "commit a9564572"}
"""The target versions named in --help (kept equal to the export modules' by a test; importing them here would
slow `prime --help`)."""

EXPORT_HELP = (
    f"""Write the same RL run for another trainer: prime-rl (a config file), Tinker or SkyRL (a command).

Examples:

    prime rl export configs/rl/digit-sums.toml --target prime-rl -o digit-sums.prime-rl.toml

    prime rl export configs/rl/digit-sums.toml --target prime-rl --model Qwen/Qwen3-0.6B

    prime rl export configs/rl/digit-sums-vf.toml --target tinker -o train-tinker.sh

    prime rl export configs/rl/digit-sums-vf.toml --target skyrl -o train-skyrl.sh

    prime rl export sft.toml --target prime-rl -o sft.prime-rl.toml     (an SFT config: prime-rl's `uv run sft`)

Targets: prime-rl {EXPORT_VERSIONS["prime-rl"]} (the file `uv run rl @ FILE` reads; validated by loading """
    f"""exported files with
prime-rl's own config classes, pydantic_config.cli(RLConfig)), tinker-cookbook {EXPORT_VERSIONS["tinker"]} """
    f"""(the verifiers_rl recipe), SkyRL's verifiers integration
({EXPORT_VERSIONS["skyrl"]}). Every value where the target's default differs from what `prime rl run` does is
written out; what cannot carry (primekit's built-in environments, `local/...` models, knobs the target lacks)
is refused with one error line naming each; what is not carried at primekit's default is listed on stderr.
Without -o the file goes to stdout. Dotted overrides work as for `prime rl run` (`--model ORG/NAME`).
"""
)


@app.command(
    "export",
    help=EXPORT_HELP,
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
@user_errors
def export(
    ctx: typer.Context,
    config: Path = typer.Argument(..., help="An RL TOML config (see configs/rl/), or an SFT config (docs/sft.md: "
                                  "prime-rl only; the dataset folder is written beside -o)."),
    target: str = typer.Option("prime-rl", "--target", "-t", metavar="prime-rl|tinker|skyrl", help="Which trainer."),
    output: Path = typer.Option(None, "--output", "-o", help="File to write (default: stdout); a symlink is "
                                "resolved and the file it points to is written."),
    force: bool = typer.Option(False, "--force", help="Replace an existing -o file (never the config itself)."),
    prime_rl_shape: str = typer.Option(
        "current", "--prime-rl-shape", metavar="current|older",
        help="prime-rl's config shape: current (group_size, [[orchestrator.train.source]]: prime-rl 559b4477, "
             "the commit this export pins) or older (rollouts_per_example, [[orchestrator.train.env]]: prime-rl up to "
             "1e0fe9637, before 20f6449e1 renamed them). --target prime-rl only."),
) -> None:
    from rl_backend.export import export_file, output_path, write_export
    from rl_backend.export.common import command_line
    from rl_backend.handoff import print_notes

    output = output_path(output, config) if output is not None else None
    result = export_file(config, list(ctx.args), target, output, prime_rl_shape)
    print_notes(result.target, result.notes)
    if output is None:
        sys.stdout.write(result.text)
        return
    for path in write_export(result, output, force=force):
        print(f"wrote {path}", file=sys.stderr)
    print(command_line(result.command))

