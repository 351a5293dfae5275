"""Which GPUs a vLLM server started for an RL run and the trainer take, and how much memory vLLM may use.

The plan's arithmetic (:mod:`rl_backend.plan` prints it, :mod:`rl_backend.sources.vllm_source` starts the server
on it), on plain values so the config's validator can refuse an impossible layout at load time without importing
the plan (which imports the config).
"""

from __future__ import annotations

from pydantic import BaseModel

SHARED_GPU_MAX_UTILIZATION = 0.8
"""Most of a GPU's memory vLLM may take when the trainer runs on the same GPU (the rest holds the
trainer's weights, gradients, optimizer state and activations)."""


class GpuLayout(BaseModel):
    """Where a started vLLM server and the trainer run (indices as this process sees its GPUs; trainer None: the
    CPU)."""

    inference: list[int]
    trainer: int | None
    memory_utilization: float

    @property
    def shared(self) -> bool:
        return self.trainer in self.inference


def plan_gpus(inference_gpus: list[int] | None, trainer_gpus: list[int] | None, memory_utilization: float | None,
               trainer_on_gpu: bool = True) -> GpuLayout:
    """The GPUs of a started server (``inference.gpus``) and of the trainer (``trainer.gpus``); ValueError when they
    share one without room left (``inference.gpu_memory_utilization``).

    ``trainer_on_gpu=False`` when this process has no CUDA (a CPU torch here, vLLM with its own CUDA
    torch elsewhere): then the server has its GPUs to itself.
    """
    gpus = list(inference_gpus) if inference_gpus else [0]
    trainer = (trainer_gpus[0] if trainer_gpus else 0) if trainer_on_gpu else None
    if len(set(gpus)) != len(gpus) or any(gpu < 0 for gpu in [*gpus, trainer or 0]):
        raise ValueError(f"GPU indices must be distinct and >= 0, got inference.gpus={gpus} "
                         f"trainer.gpus={trainer_gpus}")
    shared = trainer in gpus
    utilization = memory_utilization or (0.5 if shared else 0.9)
    if shared and utilization > SHARED_GPU_MAX_UTILIZATION:
        raise ValueError(
            f"vLLM and the trainer share GPU {trainer}, so inference.gpu_memory_utilization ({utilization:g}) must be "
            f"at most {SHARED_GPU_MAX_UTILIZATION:g} to leave the trainer room; lower it, or put them on different "
            "GPUs (inference.gpus / trainer.gpus)"
        )
    return GpuLayout(inference=gpus, trainer=trainer, memory_utilization=utilization)
