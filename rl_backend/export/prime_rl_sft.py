"""primekit's SFT config (`prime sft run`) -> a prime-rl ``sft`` config (prime-rl ``v0.8.1.dev67``).

The file is what prime-rl's SFT launcher reads (``uv run sft @ FILE``): ``max_steps``, ``[model]`` (with
``[model.lora]``), ``[data]`` (the dataset, batch, sequence length, seed), ``[optim]``, ``[scheduler]``,
``[ckpt]``, ``[run]`` and ``[deployment]``. Every value where prime-rl's default differs from what `prime sft
run` does is written out (LoRA target modules, weight decay, schedule, seed).

The dataset: prime-rl loads ``data.name`` with ``datasets.load_dataset(name, split="train")``, which takes a
Hub id or a folder, not a file; the export copies the rows (``prime data from-eval``'s ``prompt`` /
``completion`` / ``tools``, which prime-rl's SFT loader reads as they are) to ``train.jsonl`` in a folder
beside the exported file, and names that folder. prime-rl's SFT renders samples with a typed renderer only
(its ``SFTConfig`` refuses a model without one), so the model must be one that renderers registers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalkit.core.tomlio import dumps
from rl_backend.export.common import Export, hub_model, refuse
from rl_backend.export.prime_rl import COMMIT, TARGET, VERSION, lora_table, optim_table, scheduler_table
from rl_backend.sft_config import SFTConfig
from rl_backend.sft_samples import parse_rows, read_dataset

RENDERERS_VERSION = "0.1.9"
TYPED_RENDERER_MODELS = frozenset((
    "MiniMaxAI/MiniMax-M2", "MiniMaxAI/MiniMax-M2.5", "PrimeIntellect/Qwen3-0.6B", "PrimeIntellect/Qwen3-1.7B",
    "Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B", "Qwen/Qwen3-14B", "Qwen/Qwen3-235B-A22B", "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen3-30B-A3B-Instruct-2507", "Qwen/Qwen3-30B-A3B-Thinking-2507", "Qwen/Qwen3-32B", "Qwen/Qwen3-4B",
    "Qwen/Qwen3-4B-Instruct-2507", "Qwen/Qwen3-4B-Thinking-2507", "Qwen/Qwen3-8B", "Qwen/Qwen3-VL-30B-A3B-Instruct",
    "Qwen/Qwen3-VL-4B-Instruct", "Qwen/Qwen3-VL-8B-Instruct", "Qwen/Qwen3.5-0.8B", "Qwen/Qwen3.5-122B-A10B",
    "Qwen/Qwen3.5-2B", "Qwen/Qwen3.5-35B-A3B", "Qwen/Qwen3.5-397B-A17B", "Qwen/Qwen3.5-4B", "Qwen/Qwen3.5-9B",
    "Qwen/Qwen3.6-35B-A3B", "THUDM/GLM-4.5-Air", "deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-R1-0528",
    "deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-V3-Base", "meta-llama/Llama-3.2-1B-Instruct",
    "meta-llama/Llama-3.2-3B-Instruct", "moonshotai/Kimi-K2-Instruct", "moonshotai/Kimi-K2.5",
    "moonshotai/Kimi-K2.6", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
    "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16", "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16",
    "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-FP8", "openai/gpt-oss-120b", "openai/gpt-oss-20b",
    "poolside/Laguna-XS-2.1", "poolside/Laguna-XS.2", "tencent/Hy3", "tencent/Hy3-FP8", "zai-org/GLM-4.5-Air",
    "zai-org/GLM-4.7-Flash", "zai-org/GLM-5", "zai-org/GLM-5-FP8", "zai-org/GLM-5.1"
))
"""``renderers.base.MODEL_RENDERER_MAP``'s models at the renderers release prime-rl pins (checked against the
installed one by the tests when prime-rl's config package imports)."""

DATA_FILE = "train.jsonl"
"""The file name in the dataset folder: ``datasets`` reads a file named so as the ``train`` split."""

MAPPING: dict[str, str] = {
    "model": "model.name",
    "data": "data.name (a folder beside the export holding the rows as train.jsonl)",
    "run_name": "run.name",
    "seed": "data.seed (the shuffle of each epoch)",
    "epochs": "max_steps (ceil(epochs * rows / batch_size), as primekit counts them)",
    "max_steps": "max_steps",
    "batch_size": "data.batch_size (prime-rl counts packed sequences of data.seq_len tokens)",
    "trainer.lr": "optim.lr",
    "trainer.weight_decay": "optim.weight_decay",
    "trainer.adam_beta1": "optim.betas1",
    "trainer.adam_beta2": "optim.betas2",
    "trainer.max_grad_norm": "optim.max_norm",
    "trainer.lr_scheduler_type": "scheduler.type (linear: decay_steps = max_steps - warmup_steps)",
    "trainer.warmup_steps": "scheduler.warmup_steps",
    "trainer.min_lr": "scheduler.min_lr",
    "trainer.max_seq_len": "data.seq_len",
    "trainer.lora.rank": "model.lora.rank",
    "trainer.lora.alpha": "model.lora.alpha",
    "trainer.lora.dropout": "model.lora.dropout",
    "trainer.lora.target_modules": "model.lora.target_modules",
    "ckpt.interval": "ckpt.interval (0: [ckpt] alone, a checkpoint at the end)",
    "ckpt.keep_last": "ckpt.keep_last",
}
"""primekit SFT key -> prime-rl SFT key (docs/sft.md's mapping table)."""

LOCAL_ONLY = ("trainer.micro_batch_size", "trainer.bf16", "trainer.device", "trainer.gradient_checkpointing",
              "ckpt.save_weights")
"""Keys about this machine's run: prime-rl packs micro-batches by tokens, trains in its own precision, places
the trainer by ``[deployment]``, checkpoints activations by default and writes its own weights. Not carried."""

NO_MEANING: dict[str, str] = {}
NOTED: dict[str, str] = {}
"""No SFT key is refused or noted by key; the notes below say what differs in how the rows are trained."""


def build(config: SFTConfig, model: str, rows: int, data_dir: Path) -> dict[str, Any]:
    """The prime-rl SFT config as a dict (what :func:`export` writes as TOML)."""
    steps = config.total_steps(rows)
    data: dict[str, Any] = {"max_steps": steps}
    if config.run_name:
        data["run"] = {"name": config.run_name}
    data["model"] = {"name": model}
    if config.trainer.lora is not None:
        data["model"]["lora"] = lora_table(config.trainer.lora)
    data["data"] = {"type": "sft", "name": str(data_dir), "batch_size": config.batch_size,
                    "seq_len": config.trainer.max_seq_len, "seed": config.seed, "shuffle": True}
    data["optim"] = optim_table(config.trainer)
    data["scheduler"] = scheduler_table(config.trainer, steps)
    data["ckpt"] = {key: value for key, value in (("interval", config.ckpt.interval or None),
                                                   ("keep_last", config.ckpt.keep_last)) if value is not None}
    data["deployment"] = {"type": "single_node", "num_train_gpus": 1}
    return data


def _model(config: SFTConfig) -> tuple[str | None, list[str]]:
    """The model prime-rl's SFT can train: a Hub id with a typed renderer (which primekit's embedded model is not)."""
    name, _ = hub_model(config, TARGET)
    if name in TYPED_RENDERER_MODELS:
        return name, []
    what = f"primekit's embedded model '{config.model}'" if name is None else f"model '{name}'"
    return None, [f"{what} has no typed renderer in renderers {RENDERERS_VERSION}, which prime-rl's SFT requires (its "
                  "SFTConfig refuses the model); set model to one it registers, e.g. Qwen/Qwen3-0.6B or "
                  "meta-llama/Llama-3.2-1B-Instruct (renderers.base.MODEL_RENDERER_MAP)"]


def export(config: SFTConfig, *, output: Path | None = None) -> Export:
    """The prime-rl SFT config for ``config`` and its dataset folder, or one UserError naming what cannot carry."""
    model, problems = _model(config)
    if output is None:
        problems.append(
            "prime-rl loads the dataset from a folder, which the export writes beside the config; pass -o FILE"
        )
    refuse(problems, TARGET)
    assert model is not None and output is not None
    data = read_dataset(Path(config.data))  # read once: parsed here, copied as it is into the dataset folder
    rows = parse_rows(data, Path(config.data))
    data_dir = output.with_name(output.name.removesuffix(".toml") + ".data")
    text = HEADER + dumps(build(config, model, len(rows), data_dir.resolve()))
    notes = _notes(config, rows, data_dir)
    return Export(TARGET, text, ".prime-rl.toml", command=["sft", "@", str(output.resolve())], notes=notes,
                  extra_files={f"{data_dir.name}/{DATA_FILE}": data})


def _notes(config: SFTConfig, rows: list[dict[str, Any]], data_dir: Path) -> list[str]:
    steps, seq_len = config.total_steps(len(rows)), config.trainer.max_seq_len
    notes = [
        f"batch_size = {config.batch_size}: prime-rl packs rows into sequences of data.seq_len = {seq_len} tokens and "
        f"counts data.batch_size in such sequences, so each of its steps holds at least {config.batch_size} rows, and "
        f"max_steps = {steps} makes at least the {config.epochs:g} pass(es) over the {len(rows)} rows primekit makes "
        f"(more when rows are short: to match primekit's steps, set data.batch_size to about {config.batch_size} x "
        f"the mean row length in tokens / {seq_len})",
        f"rows longer than {seq_len} tokens: primekit leaves them out, prime-rl cuts them to data.seq_len",
        "not carried (this machine's run only): " + ", ".join(LOCAL_ONLY),
        f"data: {len(rows)} rows copied to {data_dir / DATA_FILE}, which the config names by its absolute path "
        "(another machine: copy the folder and fix data.name, or push it as a Hub dataset and name that)",
    ]
    few_shot = sum(1 for row in rows if any(isinstance(m, dict) and m.get("role") == "assistant"
                                            for m in (row["prompt"] if isinstance(row["prompt"], list) else [])))
    if few_shot:
        notes.append(f"{few_shot} row(s) have assistant messages in their prompt: prime-rl trains every assistant "
                     "message, primekit only the completion's")
    return notes


HEADER = (
    f"# prime-rl {VERSION} ({COMMIT[:12]}) SFT config, exported by `prime rl export --target prime-rl`.\n"
    "# Run it from a prime-rl checkout: uv run sft @ THIS_FILE  (add --dry-run to check it first).\n"
    "# data.name is the folder written beside this file; prime-rl reads its train.jsonl as the train split.\n\n"
)
