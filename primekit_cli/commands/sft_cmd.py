"""`prime sft run`: supervised fine-tuning on a chat dataset (`prime data from-eval`'s rows), RL's trainer
underneath."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from evalkit.core.runs import WEIGHTS_DIR, ResumeRequest, step_dir, step_numbers
from primekit_cli import options
from primekit_cli.argv import SFT_RUN, argv_command
from primekit_cli.errors import user_errors
from rl_backend.sft_config import SFTConfig

app = typer.Typer(help="Supervised fine-tuning on a chat dataset.", no_args_is_help=True)

RUN_HELP = """Train the model on a chat dataset: cross-entropy on the assistant's completion tokens only.

Examples:

    prime data from-eval outputs/evals/arithmetic--local-smollm2-135m/RUN -o good.jsonl --min-reward 1

    prime sft run sft.toml

    prime sft run sft.toml --epochs 2 --trainer.lr 1e-4 --run-name try1

    prime sft run sft.toml --run-name try1 --resume

    prime rl export sft.toml --target prime-rl -o sft.prime-rl.toml     (the same SFT for prime-rl's `uv run sft`)

The config speaks RL's vocabulary (model, run_name, seed, [trainer] with LoRA or full, lr, schedule,
micro_batch_size, max_seq_len, bf16, device; [ckpt]) plus data, epochs, max_steps and batch_size.
Outputs go to OUTPUT_DIR/sft/RUN_NAME/: config.resolved.toml, metrics.jsonl, checkpoints/step_N/ and
weights/step_N/ (a merged model for `prime eval run -m` and for `prime rl run`'s model). See docs/sft.md.
"""


@app.callback()
def _group() -> None:
    """Supervised fine-tuning on a chat dataset."""


SFT_FLAGS = options.FlagTable(SFTConfig, "resume", "output_dir", options.TRAINER_DEVICE)
"""``prime sft run``'s options: the trainer's device is a field flag; the rest of the config takes dotted flags."""


@app.command("run", help=RUN_HELP, cls=argv_command(SFT_RUN),
             context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@user_errors
@options.field_flags(SFT_FLAGS)
def run(
    ctx: typer.Context,
    config: Path = typer.Argument(..., help="An SFT TOML config (docs/sft.md)."),
    resume: str = typer.Option(
        None, "--resume", metavar="[STEP|RUN_DIR]", show_default=False,
        help="Continue a run: no value for the newest checkpoint of the config's run, STEP for that checkpoint, "
        "or RUN_DIR (its newest checkpoint).",
    ),
    output_dir: Path = typer.Option(Path("outputs"), "--output-dir", "-o", help="Where run folders go."),
    given: dict[str, Any] | None = None,
) -> None:
    from rich.console import Console

    from rl_backend.sft import run as run_sft
    from rl_backend.sft_config import load_sft_config

    overrides = list(ctx.args) + options.trainer_overrides(given or {})
    summary = run_sft(load_sft_config(config, overrides), output_dir=output_dir,
                      resume=ResumeRequest.parse(resume, steps=True))
    console = Console()
    console.print(
        f"[bold]done[/bold]: {summary.steps} steps on {summary.rows} rows in {summary.run_dir}", soft_wrap=True
    )
    if summary.first_loss is not None:
        console.print(f"  loss: first step {summary.first_loss:.4f}, last step {summary.last_loss:.4f}")
    exported = step_numbers(summary.run_dir / WEIGHTS_DIR)
    if exported:
        weights = step_dir(summary.run_dir / WEIGHTS_DIR, exported[-1])
        console.print(
            f"  weights: {weights}  (prime eval run ENV -m {weights}; or model = in an RL config)", soft_wrap=True
        )
