"""`prime lab setup`: example configs (endpoints, eval, gepa, rl) written into a working folder.

Two sets side by side: primekit's offline examples (``arithmetic``, ``reverse-text``, ``mixed``: the
embedded model, run as shipped) and the layout the training docs describe (``qwen-3-5``, ``qwen-3-5-moe``,
``nemotron-3``, ``llama-3`` in each of ``eval/``, ``gepa/``, ``rl/``, and ``endpoints.py``), which name
the Hub models the docs name. The examples are the repository's own ``configs/``, shipped as package data
through the ``primekit_cli/lab_configs`` link (one committed copy), so what a user gets is what the project tests.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import typer

from evalkit.core.errors import UserError
from evalkit.core.fileio import write_text_atomic
from primekit_cli.errors import user_errors

app = typer.Typer(
    help="Set up a working folder with example configs.", no_args_is_help=True, rich_markup_mode="markdown"
)


PRIME_RL_FOLDER = "prime-rl"
"""prime-rl's own configs, written to ``configs/prime-rl/`` only with ``--prime-rl``."""


def lab_config_files(prime_rl: bool = False) -> dict[str, str]:
    """Relative path (``eval/arithmetic.toml``) -> text, for every shipped example config (``prime_rl``: the
    prime-rl examples, as ``prime-rl/<name>.toml``, too)."""
    found: dict[str, str] = {}

    def walk(node: Traversable, prefix: str) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.is_dir() and not child.name.startswith(("_", ".")) and (prime_rl or child.name != PRIME_RL_FOLDER):
                walk(child, f"{prefix}{child.name}/")
            elif child.is_file() and child.name.endswith((".toml", ".py")):
                found[prefix + child.name] = child.read_text(encoding="utf-8")

    walk(resources.files("primekit_cli").joinpath("lab_configs"), "")
    return found


def write_lab_configs(dest: Path, force: bool = False, prime_rl: bool = False) -> tuple[list[Path], list[Path]]:
    """Write every example under ``dest``; existing files are skipped unless ``force``. Atomic per file."""
    written: list[Path] = []
    skipped: list[Path] = []
    for relative, text in lab_config_files(prime_rl).items():
        target = dest / relative
        if target.exists() and not force:
            skipped.append(target)
            continue
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(target, text)
        except OSError as exc:
            raise UserError(f"could not write {target}: {exc.strerror or exc}") from exc
        written.append(target)
    return written, skipped


@app.command("setup")
@user_errors
def setup(
    force: bool = typer.Option(False, "--force", help="Overwrite config files that already exist."),
    directory: Path = typer.Option(Path("configs"), "--dir", help="Where to write the configs."),
    prime_rl: bool = typer.Option(
        False,
        "--prime-rl",
        help=(
            "Also write example prime-rl configs (prime-rl v0.8.1.dev67's shape) to prime-rl/, "
            "for training on more GPUs than one with prime-rl itself."
        ),
    ),
) -> None:
    """Write example configs: endpoints.toml and endpoints.py; eval/, gepa/ and rl/ TOMLs.

    arithmetic / reverse-text / mixed run offline as shipped (the embedded model); qwen-3-5, qwen-3-5-moe,
    nemotron-3 and llama-3 are the training docs' per-family files, naming their Hub models (fetch one with
    `hf download ORG/NAME` first: without it they stop on that one line). `--prime-rl` adds prime-rl's own
    configs in prime-rl/ (run them with prime-rl: `uv run rl @ configs/prime-rl/reverse-text.toml`); primekit
    neither installs nor runs prime-rl here. Existing files are kept (and listed as skipped) unless `--force`.

    Examples:

        prime lab setup

        prime eval run configs/eval/arithmetic.toml

        prime lab setup --force

        prime lab setup --prime-rl
    """
    written, skipped = write_lab_configs(directory, force, prime_rl)
    for path in written:
        print(f"wrote    {path}")
    for path in skipped:
        print(f"skipped  {path} (exists; --force to overwrite)")
    print(f"{len(written)} written, {len(skipped)} skipped; next: prime eval run {directory}/eval/arithmetic.toml")
