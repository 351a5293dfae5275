"""Exports of primekit's RL config (and SFT config, to prime-rl: :mod:`.prime_rl_sft`) to trainers that run beyond one
machine: prime-rl, Tinker, SkyRL.

Each target is one module with one job (:mod:`.prime_rl`, :mod:`.tinker`, :mod:`.skyrl`): an
``export(config, ...) -> Export`` that translates what carries, writes every value where the
target's default differs from what `prime rl run` would do, and refuses with one
:class:`~evalkit.core.errors.UserError` line what cannot carry (see :mod:`.common` for the rules). An
export reads the config and imports the environments' modules to tell their kind; it loads no
model weights and needs none of the targets installed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from evalkit.core.errors import UserError
from evalkit.core.fileio import refuse_existing, write_text_atomic
from evalkit.core.tomlio import load_toml
from rl_backend.config import RLConfig, is_sft_table, load_rl_config
from rl_backend.export import prime_rl, skyrl, tinker
from rl_backend.export.common import Export

TARGETS: dict[str, ModuleType] = {"prime-rl": prime_rl, "tinker": tinker, "skyrl": skyrl}


def export_config(config: RLConfig, target: str, output: Path | None = None, prime_rl_shape: str = "current") -> Export:
    """``config`` translated for ``target``; UserError for an unknown target or what cannot carry."""
    module = TARGETS.get(target)
    if module is None:
        raise UserError(f"unknown export target '{target}'; choose one of: {', '.join(TARGETS)}")
    if prime_rl_shape != "current" and target != prime_rl.TARGET:
        raise UserError(f"--prime-rl-shape {prime_rl_shape} is for --target prime-rl, not {target}")
    run: Callable[..., Export] = module.export
    return run(config, output=output, shape=prime_rl_shape) if target == prime_rl.TARGET else run(config, output=output)


def is_sft_config(path: Path) -> bool:
    """Whether ``path`` is a `prime sft run` config (it names a ``data`` file and no ``[[env]]``)."""
    return is_sft_table(load_toml(path))


def export_file(path: Path, overrides: list[str], target: str, output: Path | None = None,
                prime_rl_shape: str = "current") -> Export:
    """Export the RL or SFT config at ``path`` (dotted ``overrides`` applied); SFT configs go to prime-rl only."""
    if not is_sft_config(path):
        return export_config(load_rl_config(path, overrides), target, output, prime_rl_shape)
    if prime_rl_shape != "current":
        raise UserError(f"--prime-rl-shape {prime_rl_shape} is for RL configs; an SFT config exports in the current "
                        "shape only")
    if target != prime_rl.TARGET:
        raise UserError(f"{path} is an SFT config (`prime sft run`); it exports to prime-rl only (--target prime-rl), "
                        f"not {target}")
    from rl_backend.export import prime_rl_sft
    from rl_backend.sft_config import load_sft_config

    return prime_rl_sft.export(load_sft_config(path, overrides), output=output)


def output_path(output: Path, config_path: Path) -> Path:
    """Where ``-o output`` is written: a symlink is resolved (the file it points to is written, and that path
    is what the printed command names); UserError when that is the input config itself."""
    target = output.expanduser().resolve()
    if target == config_path.expanduser().resolve():
        raise UserError(f"-o {output} is the config being exported; choose another output file")
    return target


def write_export(result: Export, output: Path, *, force: bool = False) -> list[Path]:
    """Write the export (and the files that must sit beside it, a name with a folder in it made there)
    atomically; returns the paths written.

    A file already there is replaced only with ``force`` (checked for every path before anything is written)."""
    refuse_existing([output, *(output.parent / name for name in result.extra_files)], force)
    written = []
    output.parent.mkdir(parents=True, exist_ok=True)
    for name, text in result.extra_files.items():
        (output.parent / name).parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(output.parent / name, text)
        written.append(output.parent / name)
    write_text_atomic(output, result.text)
    if result.suffix.endswith(".sh"):
        output.chmod(0o755)
    return [output, *written]


__all__ = ["TARGETS", "Export", "export_config", "export_file", "is_sft_config", "output_path", "write_export"]
