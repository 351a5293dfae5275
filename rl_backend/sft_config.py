"""The `prime sft run` config: supervised fine-tuning on a chat dataset (``prime data from-eval``'s rows).

The vocabulary is RL's (:mod:`rl_backend.config`): ``model``, ``run_name``, ``seed``, ``[trainer]`` (the
optimizer, schedule, batching, precision, LoRA and device fields RL's trainer has, :class:`OptimizerFields`)
and ``[ckpt]``; SFT adds only what RL has no word for: the dataset file and the number of passes over it.
Imports no torch.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator

from evalkit.core.defaults import DEFAULT_MODEL
from evalkit.core.dotted import deep_merge
from evalkit.core.errors import ConfigError
from evalkit.core.tomlio import dumps, load_toml, validate
from evalkit.core.untrusted import name_problem
from rl_backend.config import CkptConfig, OptimizerFields, _Strict, parse_overrides, resolve_local_model


class SFTConfig(_Strict):
    """A ``prime sft run`` config."""

    model: str = DEFAULT_MODEL
    """Model to train: ``local/smollm2-135m`` (embedded), a local Hugging Face folder (an RL or SFT run's
    ``weights/step_N``)."""
    data: str
    """The chat dataset: a JSONL file of ``prompt``/``completion`` message lists (and ``tools``), as `prime data
    from-eval` writes it; a relative path is read against the config's folder."""
    run_name: str | None = None
    """Output folder name under ``<output-dir>/sft/``; default: the dataset's file name plus a timestamp."""
    seed: int = 0
    """Seed for the data order and LoRA initialisation."""
    epochs: float = Field(1.0, gt=0)
    """Passes over the dataset (fractions allowed); the steps are ``ceil(epochs * rows / batch_size)``."""
    max_steps: int | None = Field(None, gt=0)
    """Stop after this many optimizer steps (default: what ``epochs`` gives)."""
    batch_size: int = Field(8, gt=0)
    """Rows per optimizer step (gradients accumulate over ``trainer.micro_batch_size`` rows at a time)."""
    trainer: OptimizerFields = Field(default_factory=OptimizerFields)
    """Optimizer, schedule, batching, precision, LoRA, device: the same fields as RL's ``[trainer]``."""
    ckpt: CkptConfig = Field(default_factory=CkptConfig)
    """Checkpoints (``checkpoints/step_N``) and merged weight exports (``weights/step_N``), as in RL."""

    @field_validator("run_name")
    @classmethod
    def _run_name_is_a_name(cls, value: str | None) -> str | None:
        why = name_problem(value) if value is not None else None
        if why:
            raise ValueError(
                f"{value!r} is not a folder name ({why}); use a plain name, and -o/--output-dir to choose where runs go"
            )
        return value

    def total_steps(self, rows: int) -> int:
        """Optimizer steps of the run on ``rows`` dataset rows."""
        import math

        by_epochs = max(1, math.ceil(self.epochs * rows / self.batch_size))
        return min(by_epochs, self.max_steps) if self.max_steps is not None else by_epochs


def load_sft_config(path: str | Path, overrides: list[str] | None = None) -> SFTConfig:
    """Read, override (dotted flags, as `prime rl run`) and validate; paths resolve against the config's folder."""
    data = deep_merge(load_toml(path), parse_overrides(list(overrides or [])))
    if "env" in data and "data" not in data:  # an RL config given to SFT by mistake
        raise ConfigError(f"{path} is an RL config (it names [[env]] and no `data` file); run it with "
                          f"`prime rl run {path}`, or make SFT rows from an eval with `prime data from-eval`")
    try:
        config = validate(SFTConfig, data, path)
    except ConfigError as exc:
        raise ConfigError(str(exc).replace("'(top level)': ", "")) from None
    folder = Path(path).resolve().parent
    config.model = resolve_local_model(config.model, folder)
    config.data = str((folder / Path(config.data).expanduser()).resolve())
    return config


def to_toml(config: SFTConfig) -> str:
    """The resolved config (``config.resolved.toml``; reloadable by `prime sft run`)."""
    data = config.model_dump(mode="json", exclude_none=True)
    if config.trainer.lora is None:
        data["trainer"]["lora"] = False
    return dumps(data)
