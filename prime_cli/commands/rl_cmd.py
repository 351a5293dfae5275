"""`prime rl run`: baseline checks, then RL fine-tuning of a model on an environment."""

from __future__ import annotations

from pathlib import Path

import typer

from prime_cli.errors import user_errors
from prime_cli.resume_option import LATEST, is_step_or_folder, resume_command

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

Any config key can be overridden with a dotted flag (`--trainer.loss.type clip`, `--sampling.max_tokens 64`).
Configs written for hosted training, prime-rl (its single-file shape: [model] name, [trainer.optim],
[orchestrator] ...), verifiers' vf-rl ([trainer.args]) and the self-hosted quick start (model_name, num_gpus,
learning_rate) are read too: keys that mean the same are mapped (README: "Configs from other trainers"), keys
with no effect here are listed as notes in the plan, and the rest is refused by name.
Outputs go to OUTPUT_DIR/rl/RUN_NAME/: config.resolved.toml, baseline.json, metrics.jsonl, rollouts/,
checkpoints/step_N/ and weights/step_N/ (a merged model for `prime eval run -m`); the baseline checks and
periodic evals are eval run dirs in baseline/ and evals/step_N/ (`prime eval view` reads them).
"""


@app.command(
    "run",
    help=RUN_HELP,
    cls=resume_command(("--resume",), is_step_or_folder),
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
@user_errors
def run(
    ctx: typer.Context,
    config: Path = typer.Argument(..., help="An RL TOML config (see configs/rl/)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the resolved config and the plan, then exit."),
    resume: str = typer.Option(
        None, "--resume", metavar="[STEP|RUN_DIR]", show_default=False,
        help="Continue a run: no value for the newest checkpoint of the config's run, STEP for that checkpoint, "
        "or RUN_DIR (its newest checkpoint).",
    ),
    skip_baseline: bool = typer.Option(False, "--skip-baseline", help="Train even when the baseline checks would refuse."),
    output_dir: Path = typer.Option(Path("outputs"), "--output-dir", "-o", help="Where run folders go."),
    device: str = typer.Option(None, "--device", help="Trainer and in-process sampler: auto, cpu, cuda or cuda:N (the config's trainer.device). [default: auto]"),
    env_file: list[Path] = typer.Option(None, "--env-file", help="A KEY=VALUE secrets file (judge or tool API keys) loaded for the run; repeatable, added to the config's env_file. Values are never written; config.resolved.toml records the path."),
) -> None:
    from evalkit.secrets_file import load_env_files
    from rl_backend.config import load_rl_config
    from rl_backend.runner import run as run_rl

    overrides = list(ctx.args) + (["--trainer.device", device] if device is not None else [])
    cfg = load_rl_config(config, overrides)
    cfg.env_file = [*cfg.env_file, *(str(p.expanduser().resolve()) for p in env_file or [])]
    load_env_files(cfg.env_file, apply=not dry_run)
    summary = run_rl(cfg, output_dir=output_dir, resume=_resume_value(resume), skip_baseline=skip_baseline, dry_run=dry_run)
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
    weights = sorted((summary.run_dir / "weights").glob("step_*"), key=lambda p: int(p.name.split("_")[1]))
    if weights:
        console.print(f"  weights: {weights[-1]}  (prime eval run ENV -m {weights[-1]})")


def _resume_value(resume: str | None) -> bool | int | Path | None:
    """``--resume`` alone: the newest checkpoint (True); ``--resume 12``: step 12; ``--resume DIR``: that run."""
    if resume is None:
        return None
    if resume == LATEST:
        return True
    if resume.isdigit():
        return int(resume)
    return Path(resume).expanduser()
