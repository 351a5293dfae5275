"""RL config shapes other trainers document, read as primekit's own.

Users copy RL configs from four places: hosted training (primekit's own top-level shape, plus a few
keys of its own), prime-rl's single-file shape of late 2025 (``inference_gpu_ids``, ``[model] name``,
``[trainer.optim]``, ``[trainer.model.lora]``, ``[orchestrator]``, ``[orchestrator.sampling]``,
``[[orchestrator.env]]``, ``[inference.model]``), verifiers' ``vf-rl`` trainer (``[trainer.args]``,
GPU counts in ``[inference]``/``[trainer]``, ``[inference.args]``) and the self-hosted quick start
(``model_name``, ``num_gpus``, ``tensor_parallel_size``, ``learning_rate``).

:func:`translate` runs before validation. Every key of those shapes that means the same thing as one
of ours is moved to ours (README's table lists them); a key that changes nothing here (a kernel
choice, an adapter's name) is dropped with a note for the plan; a key primekit cannot honour is
refused with the key and why. Keys left in the other trainers' own tables are refused by name;
keys nobody documents reach validation, which rejects them as unknown. Setting one value both ways
(``learning_rate`` and ``[trainer] lr``) is an error unless both say the same.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evalkit.core import dotted

SKIP = object()
"""What a rule's ``convert`` returns for a value that needs no key of ours (``use_lora = true``: the default)."""


class _Refused(ValueError):
    pass


@dataclass(frozen=True)
class Rule:
    """What happens to one foreign key: ``to`` (our dotted key) with ``convert`` applied, a ``note``
    (accepted, no effect), or ``refuse`` (why not). ``check`` may refuse by value (returns a reason)."""

    to: str | None = None
    convert: Callable[[Any], Any] | None = None
    note: str | None = None
    refuse: str | None = None
    check: Callable[[Any], str | None] | None = None


def to(key: str, convert: Callable[[Any], Any] | None = None, check: Callable[[Any], str | None] | None = None) -> Rule:
    return Rule(to=key, convert=convert, check=check)


def note(why: str, check: Callable[[Any], str | None] | None = None) -> Rule:
    return Rule(note=why, check=check)


def refuse(why: str) -> Rule:
    return Rule(refuse=why)


def _only(*allowed: Any, why: str) -> Callable[[Any], str | None]:
    return lambda value: None if value in allowed else why


MULTI_GPU = "multi-GPU training and parallelism are prime-rl's job (`prime rl export`); primekit trains on one device"
KERNEL = "a kernel choice; primekit's trainer runs the model's own transformers modules, with the same result"
DATA_ORDER = ("prime-rl's buffer moves easy/hard examples out of the pool; primekit draws examples in a fixed "
              "seeded order (so --resume repeats it) and drops zero-variance groups per step ([filter])")

SAMPLING = ("max_tokens", "temperature", "top_p", "top_k", "min_p", "repetition_penalty")
LORA = {
    "rank": to("trainer.lora.rank"),
    "alpha": to("trainer.lora.alpha"),
    "dropout": to("trainer.lora.dropout"),
    "target_modules": to("trainer.lora.target_modules"),
    "modules_to_save": refuse("primekit's LoRA trains adapters only; use trainer.lora = false for full fine-tuning"),
}
BUFFER = {
    "online_difficulty_filtering": to("filter.enabled"),
    "type": to(
        "filter.enabled",
        lambda v: True,
        check=_only("online-difficulty", why="only 'online-difficulty' has a counterpart ([filter])"),
    ),
    "oversampling_factor": to("filter.oversampling_factor"),
    "env_ratios": to("buffer.env_ratios"),
    "seed": note("the data order follows the run's top-level seed"),
    **{key: refuse(DATA_ORDER) for key in ("easy_threshold", "hard_threshold", "easy_fraction", "hard_fraction")},
}
CKPT = {"interval": to("ckpt.interval"), "keep": to("ckpt.keep_last"),
        "resume_step": refuse("resume with `prime rl run CONFIG --resume STEP`")}
EVAL = {"interval": to("eval.interval"), "num_examples": to("eval.num_examples"),
        "rollouts_per_example": to("eval.rollouts_per_example"), "eval_base_model": to("eval.at_start"),
        "env": to("eval.env", lambda v: [v] if isinstance(v, dict) else v)}
TRUNCATION = {
    "mask_truncated_completions": to("trainer.mask_truncated_completions"),
    "zero_truncated_completions": to("trainer.zero_truncated_completions"),
    "mask_env_responses": note("environment and tool tokens are never trained on",
                               check=_only(True, why="primekit always masks environment responses")),
}


RENDERER = "primekit renders prompts with the model's own chat template"


def _prefixed(prefix: str, rules: dict[str, Rule]) -> dict[str, Rule]:
    return {f"{prefix}.{key}": rule for key, rule in rules.items()}


RULES: dict[str, Rule] = {
    # hosted training's top-level keys and the quick start's
    "model_name": to("model"),
    "learning_rate": to("trainer.lr"),
    "lora_alpha": to("trainer.lora.alpha"),
    "lora_rank": to("trainer.lora.rank"),
    "oversampling_factor": to("filter.oversampling_factor"),
    "max_async_level": to("trainer.async_level"),
    "max_model_len": to("inference.max_model_len"),
    "seq_len": to("trainer.max_seq_len"),
    "inference_gpu_ids": to("inference.gpus"),
    "trainer_gpu_ids": to("trainer.gpus"),
    "output_dir": refuse("the output folder is `prime rl run -o DIR` (the run goes to DIR/rl/<run_name>)"),
    **_prefixed("buffer", {k: r for k, r in BUFFER.items() if k != "env_ratios"}),
    **_prefixed("ckpt", {k: r for k, r in CKPT.items() if k != "interval"}),
    "eval.eval_base_model": to("eval.at_start"),
    # prime-rl: [model] (see _model_table), [trainer.*], [orchestrator.*], [inference.*]
    "trainer.model.name": to("model"),
    "trainer.model.seq_len": to("trainer.max_seq_len"),
    "trainer.model.impl": note(KERNEL),
    "trainer.model.attn": note(KERNEL),
    "trainer.model.ac": to("trainer.gradient_checkpointing", lambda v: True),
    **_prefixed("trainer.model.lora", LORA),
    **_prefixed("trainer.model.experimental.lora", LORA),
    **{
        f"trainer.model.{key}": refuse(MULTI_GPU)
        for key in ("dp_replicate", "ep", "tp", "cp", "fsdp_cpu_offload", "reshard_after_forward")
    },
    "trainer.optim.type": note(
        "AdamW is primekit's optimizer", check=_only("adamw", why="primekit's trainer uses AdamW only")
    ),
    "trainer.optim.lr": to("trainer.lr"),
    "trainer.optim.weight_decay": to("trainer.weight_decay"),
    "trainer.optim.max_norm": to("trainer.max_grad_norm", lambda v: 0.0 if v == "None" else v),  # "None": no clipping
    "trainer.optim.betas1": to("trainer.adam_beta1"),
    "trainer.optim.betas2": to("trainer.adam_beta2"),
    "trainer.scheduler.type": to("trainer.lr_scheduler_type"),
    "trainer.scheduler.warmup_steps": to("trainer.warmup_steps"),
    "trainer.scheduler.min_lr": to("trainer.min_lr"),
    "trainer.loss.type": to("trainer.loss.type", lambda v: "dppo" if v == "default" else v),  # prime-rl's default
    "trainer.loss.mask_ratio_low": to("trainer.loss.mask_low"),
    "trainer.loss.mask_ratio_high": to("trainer.loss.mask_high"),
    "trainer.loss.ratio_type": note(
        "importance ratios are per token", check=_only("token", why="primekit's ratios are per token")
    ),
    **_prefixed("trainer.ckpt", CKPT),
    "trainer.ckpt.weights": note(
        "weights/step_N holds the merged model; checkpoints/step_N/trainable holds the adapter"
    ),
    "trainer.weight_broadcast": note(
        "the torch engine reads the trainer's weights in process; a vLLM server gets the adapter only"
    ),
    "orchestrator.batch_size": to("batch_size"),
    "orchestrator.rollouts_per_example": to("rollouts_per_example"),
    "orchestrator.seq_len": to("trainer.max_seq_len"),
    "orchestrator.max_steps": to("max_steps"),
    "orchestrator.seed": to("seed"),
    "orchestrator.max_concurrent": to("max_concurrent"),
    "orchestrator.oversampling_factor": to("filter.oversampling_factor"),
    "orchestrator.max_async_level": to("trainer.async_level"),
    "orchestrator.trajectory_strategy": to("trajectory_strategy"),
    "orchestrator.lora_name": note("primekit names each step's adapter itself (adapters/step_N)"),
    "orchestrator.env": to("env", lambda v: [v] if isinstance(v, dict) else v),
    "orchestrator.max_inflight_rollouts": to("max_concurrent"),  # before 20f6449e1 (see _train_envs)
    "orchestrator.filters": to("filter.enabled", lambda v: _zero_advantage(v) is not False),
    "orchestrator.env_mix.probabilities": to("buffer.env_ratios"),
    "orchestrator.env_mix.strategy": note(
        "environments are interleaved in proportion to their ratios",
        check=_only("interleave", why="only 'interleave' has a counterpart"),
    ),
    **_prefixed("orchestrator", TRUNCATION),
    **_prefixed("orchestrator.sampling", {key: to(f"sampling.{key}") for key in SAMPLING}),
    **_prefixed("orchestrator.buffer", BUFFER),
    **_prefixed("orchestrator.ckpt", CKPT),
    **_prefixed("orchestrator.eval", EVAL),
    "inference.enable_lora": note("a vLLM server started by primekit always has LoRA on"),
    "inference.model.name": to("model"),
    "inference.model.tool_call_parser": to("inference.tool_call_parser"),
    "inference.model.enable_auto_tool_choice": note("primekit passes it whenever inference.tool_call_parser is set"),
    "inference.model.max_model_len": to("inference.max_model_len"),
    "inference.model.enforce_eager": to("inference.server_args", lambda v: ["--enforce-eager"] if v else []),
    "inference.parallel": refuse(MULTI_GPU + "; several inference.gpus give vLLM tensor parallelism"),
    # prime-rl's current shape (the commit export pins): group_size, [orchestrator.algo], [orchestrator.train.*],
    # [[orchestrator.*.source]] (see _sources), [monitors.wandb], [orchestrator.renderer], [inference.vllm]
    "orchestrator.group_size": to("rollouts_per_example"),
    "orchestrator.concurrency.max_inflight": to("max_concurrent"),
    "orchestrator.train.filter_zero_advantages": to("filter.enabled"),
    "orchestrator.eval.group_size": to("eval.rollouts_per_example"),
    "orchestrator.eval.skip_first_step": to("eval.at_start", lambda v: not v),
    "run.name": to("run_name"),
    "deployment.type": note("primekit trains on this machine", check=_only("single_node", why=MULTI_GPU)),
    "deployment.num_train_gpus": note("one trainer device", check=_only(1, why=MULTI_GPU)),
    "deployment.num_infer_gpus": note("inference.gpus places a vLLM server"),
    "orchestrator.algo": to("algo"),
    **_prefixed("orchestrator.train.sampling", {key: to(f"sampling.{key}") for key in SAMPLING if key != "max_tokens"}),
    "orchestrator.train.sampling.max_completion_tokens": to("sampling.max_tokens"),
    "orchestrator.eval.sampling.temperature": to("eval.temperature"),
    "orchestrator.renderer.name": note(RENDERER),
    **{f"monitors.wandb.{key}": to(f"wandb.{key}") for key in ("project", "entity", "name")},
    "inference.vllm.gpu_memory_utilization": to("inference.gpu_memory_utilization"),
    "inference.vllm.max_model_len": to("inference.max_model_len"),
    "inference.vllm.enforce_eager": to("inference.server_args", lambda v: ["--enforce-eager"] if v else []),
    "inference.vllm.tool_call_parser": to("inference.tool_call_parser"),
}

VF_RL: dict[str, Rule] = {  # verifiers' vf-rl [trainer.args] (transformers TrainingArguments names)
    "run_name": to("run_name"),
    "batch_size": to("batch_size"),
    "rollouts_per_example": to("rollouts_per_example"),
    "max_steps": to("max_steps"),
    "seed": to("seed"),
    "max_concurrent": to("max_concurrent"),
    "micro_batch_size": to("trainer.micro_batch_size"),
    "max_seq_len": to("trainer.max_seq_len"),
    **{key: to(f"sampling.{key}") for key in SAMPLING},
    "learning_rate": to("trainer.lr"),
    "weight_decay": to("trainer.weight_decay"),
    "adam_beta1": to("trainer.adam_beta1"),
    "adam_beta2": to("trainer.adam_beta2"),
    "lr_scheduler_type": to("trainer.lr_scheduler_type", lambda v: "constant" if v == "constant_with_warmup" else v),
    "warmup_steps": to("trainer.warmup_steps"),
    "max_grad_norm": to("trainer.max_grad_norm"),
    "gradient_checkpointing": to("trainer.gradient_checkpointing"),
    "bf16": to("trainer.bf16"),
    "beta": to("trainer.kl_coef"),
    "mask_ratio_low": to("trainer.loss.mask_low"),
    "mask_ratio_high": to("trainer.loss.mask_high"),
    **TRUNCATION,
    "use_lora": to("trainer.lora", lambda v: SKIP if v else False),
    "lora_rank": to("trainer.lora.rank"),
    "lora_alpha": to("trainer.lora.alpha"),
    "lora_dropout": to("trainer.lora.dropout"),
    "lora_target_modules": to("trainer.lora.target_modules"),
    "use_liger": note(KERNEL),
    "save_steps": to("ckpt.interval", int),
    "save_total_limit": to("ckpt.keep_last"),
    "save_strategy": note("checkpoints follow ckpt.interval", check=_only("steps", "no", why="only 'steps' or 'no'")),
    "save_only_model": note("checkpoints keep the optimizer so --resume continues exactly"),
    "eval_strategy": note(
        "periodic evals follow eval.interval", check=_only("steps", "no", why="only 'steps' or 'no'")
    ),
    "eval_steps": to("eval.interval", int),
    "logging_steps": note("metrics.jsonl gets a line every step"),
    "report_to": note("W&B logging is on when a [wandb] table is given"),
    "shuffle_dataset": note("examples are drawn in a seeded shuffled order"),
    "vllm_server_port": to("inference.port"),
    "vllm_server_timeout": to("inference.startup_timeout_s"),
    "output_dir": RULES["output_dir"],
    "max_prompt_len": refuse(
        "primekit never cuts prompts; a sample longer than trainer.max_seq_len is dropped and counted"
    ),
}


def translate(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``data`` with every documented foreign key moved to ours; the notes for the plan.

    Raises ``ValueError`` (pydantic turns it into the config's one ``error:`` line) for a refused key.
    """
    work = copy.deepcopy(data)
    notes: list[str] = []
    prime_rl_shape = isinstance(work.get("model"), dict) or "orchestrator" in work
    for key in ("env", "eval.env"):  # a single [env] table
        if isinstance(dotted.get(work, key), dict):
            _put_list(work, key)
    _model_table(work)
    if prime_rl_shape and isinstance(work.get("ckpt"), dict) and "interval" not in work["ckpt"]:
        work["ckpt"]["interval"] = 0  # prime-rl's [ckpt] without an interval saves at the end only
    _gpu_counts(work, notes)
    current_shape = _current_shape(work)
    if current_shape and all(dotted.get(work, key) is dotted.MISSING for key in ("trainer.model.lora", "trainer.lora")):
        _put(work, "trainer.lora", False, "trainer.model")  # no [trainer.model.lora]: prime-rl trains every weight
        notes.append("trainer.model.lora: absent, so every weight is trained (prime-rl's default; primekit's is LoRA)")
    _train_envs(work)
    _sources(work, notes)
    _decay_steps(work)
    for source, rule in RULES.items():
        _apply(work, source, rule, notes)
    args = dotted.get(work, "trainer.args")
    if args is not dotted.MISSING:
        dotted.pop(work, "trainer.args")
        if not isinstance(args, dict):
            raise _Refused("trainer.args must be a table (verifiers' vf-rl [trainer.args])")
        for key, value in args.items():
            rule = VF_RL.get(key)
            if rule is None:
                raise _Refused(f"trainer.args.{key}: verifiers' vf-rl key with no primekit counterpart")
            _use(work, f"trainer.args.{key}", value, rule, notes)
    if current_shape and dotted.get(work, "trainer.loss.type") is dotted.MISSING:
        _put(work, "trainer.loss.type", "dppo", "trainer.loss")
        notes.append("trainer.loss: prime-rl's default loss (DPPO + KL), primekit's 'dppo'")
    _tokenizer(work, notes)
    _server_args(work, notes)
    _check_off_policy(work, notes)
    _leftovers(work)
    return work, notes


def _decay_steps(work: dict[str, Any]) -> None:
    """prime-rl's linear schedule states its decay; primekit's has two: warm-up then constant (``decay_steps = 0``,
    how the export writes it) or decay to ``min_lr`` over the steps after warm-up (``decay_steps = max_steps -
    warmup_steps``). Either reads back as that schedule; another length is one a primekit run cannot follow."""
    decay = dotted.get(work, "trainer.scheduler.decay_steps")
    if decay is dotted.MISSING:
        return
    dotted.pop(work, "trainer.scheduler.decay_steps")
    kind = dotted.get(work, "trainer.scheduler.type")
    if kind != "linear":
        raise _Refused(f"trainer.scheduler.decay_steps: only a linear schedule has one (type is {kind!r})")
    warmup = dotted.get(work, "trainer.scheduler.warmup_steps")
    warmup = 0 if warmup is dotted.MISSING else warmup
    max_steps = next((value for key in ("max_steps", "orchestrator.max_steps", "trainer.max_steps")
                      if (value := dotted.get(work, key)) is not dotted.MISSING), None)
    if decay == 0:
        work["trainer"]["scheduler"]["type"] = "constant"  # warm-up, then the peak rate
        return
    wanted = "max_steps - warmup_steps" if max_steps is None else str(max_steps - warmup)
    if max_steps is None or decay != max_steps - warmup:
        raise _Refused(
            f"trainer.scheduler.decay_steps = {decay}: primekit's linear schedule decays over the steps after "
            f"warm-up ({wanted}); set it to that, or to 0 for a constant rate after warm-up"
        )


ZERO_ADVANTAGE_GATE = {"type": "advantage_range", "reject_min": 0.0, "reject_max": 0.0}
"""A curriculum gate that rejects groups whose advantages are all zero: primekit's difficulty filter."""


def _current_shape(work: dict[str, Any]) -> bool:
    """Whether the config is in prime-rl's current shape (whose default loss is DPPO + KL), not the older one."""
    return any(dotted.get(work, key) is not dotted.MISSING for key in
               ("orchestrator.group_size", "orchestrator.train", "orchestrator.algo", "orchestrator.eval.source"))


def _sources(work: dict[str, Any], notes: list[str]) -> None:
    """prime-rl's ``[[orchestrator.train.source]]`` / ``[[orchestrator.eval.source]]`` (one environment each: a
    taskset, the agent's harness and runtime, and for training its own ``algo``) as ``[[env]]`` / ``[[eval.env]]``;
    ``[orchestrator.eval.sampling] max_completion_tokens`` is accepted where it equals the training one."""
    for key, target in (("orchestrator.train.source", "env"), ("orchestrator.eval.source", "eval.env")):
        value = dotted.get(work, key)
        if value is dotted.MISSING:
            continue
        dotted.pop(work, key)
        tables = [value] if isinstance(value, dict) else value
        if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
            raise _Refused(f"{key} must be [[{key}]] tables")
        tables = [dict(t) for t in tables]
        ratios = [t.pop("ratio", None) for t in tables]
        _put(work, target, [_source(t, f"{key}[{i}]", train=target == "env", notes=notes)
                            for i, t in enumerate(tables)], key)
        if target != "env":
            if any(r is not None for r in ratios):
                raise _Refused(f"{key}.ratio: evaluation sources have no ratio; remove it")
        elif len(tables) > 1 or ratios[0] is not None:  # prime-rl draws each source by its ratio, 1.0 unless set
            _put(work, "buffer.env_ratios", [1.0 if r is None else r for r in ratios], f"{key}.ratio")
    eval_tokens = dotted.get(work, "orchestrator.eval.sampling.max_completion_tokens")
    if eval_tokens is not dotted.MISSING:
        dotted.pop(work, "orchestrator.eval.sampling.max_completion_tokens")
        train = dotted.get(work, "orchestrator.train.sampling.max_completion_tokens")
        if train is dotted.MISSING or train != eval_tokens:
            raise _Refused(f"orchestrator.eval.sampling.max_completion_tokens = {eval_tokens!r}: primekit's periodic "
                           "evals sample with the training max_tokens; set both the same or remove it")
        notes.append("orchestrator.eval.sampling.max_completion_tokens: the training max_tokens, which evals use")


def _train_envs(work: dict[str, Any]) -> None:
    """prime-rl's shape before its commit ``20f6449e1``: ``[[orchestrator.train.env]]`` tables are our ``[[env]]``
    (``id``, ``name``, ``args``), their ``ratio`` our ``buffer.env_ratios``."""
    key = "orchestrator.train.env"
    tables = dotted.get(work, key)
    if tables is dotted.MISSING:
        return
    dotted.pop(work, key)
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise _Refused(f"{key} must be [[{key}]] tables")
    tables = [dict(t) for t in tables]
    ratios = [t.pop("ratio", None) for t in tables]
    _put(work, "env", tables, key)
    if any(r is not None for r in ratios):
        _put(work, "buffer.env_ratios", ratios, f"{key}.ratio")


def _zero_advantage(filters: Any) -> bool | None:
    """Whether prime-rl's older ``[[orchestrator.filters]]`` enforce its zero-advantage filter (None: not listed, so
    its default list's does); any other filter enforced is refused."""
    enforced = None
    for table in filters if isinstance(filters, list) else [filters]:
        kind = table.get("type") if isinstance(table, dict) else None
        if kind == "zero_advantage":
            enforced = table.get("enforce", True)
        elif kind not in ("gibberish", "repetition") or table.get("enforce", False):
            raise _Refused(f"orchestrator.filters: {table!r} has no primekit counterpart (primekit filters only "
                           "zero-advantage groups, [filter])")
    return enforced


def _source(table: dict[str, Any], where: str, train: bool, notes: list[str]) -> dict[str, Any]:
    """One source as an ``[[env]]`` table: ``env.taskset.id`` is the id, the taskset's other keys its args."""
    table = copy.deepcopy(table)
    out: dict[str, Any] = {}
    if "name" in table:
        out["name"] = table.pop("name")
    if train and "algo" in table:
        out["algo"] = table.pop("algo")
    if train and table.get("curriculum") == {"gates": {"zero_advantage": ZERO_ADVANTAGE_GATE}}:
        del table["curriculum"]  # what primekit's difficulty filter does ([filter], on by default)
        notes.append(f"{where}.curriculum.gates.zero_advantage: primekit's difficulty filter ([filter])")
    env = table.pop("env", {})
    taskset = dict(env.pop("taskset", {})) if isinstance(env, dict) else {}
    if "id" not in taskset:
        raise _Refused(f"{where}.env.taskset.id: give the environment id")
    out["id"] = taskset.pop("id")
    if taskset:
        out["args"] = taskset
    seats = [seat for seat, value in env.items() if isinstance(value, dict) and {"harness", "runtime"} & set(value)]
    for seat in seats:  # `agent`, or each seat of a multi-agent taskset (player0, player1, ...)
        agent = env.pop(seat)
        harness, runtime = agent.pop("harness", {}), agent.pop("runtime", {})
        if harness.get("id", "null") != "null" or set(harness) - {"id"}:
            raise _Refused(f"{where}.env.{seat}.harness = {harness!r}: prime-rl harness with no primekit counterpart "
                           "(primekit runs the environment's own rollout loop, prime-rl's 'null' harness)")
        if runtime.get("type", "subprocess") != "subprocess" or set(runtime) - {"type"}:
            raise _Refused(f"{where}.env.{seat}.runtime = {runtime!r}: prime-rl runtime with no primekit counterpart "
                           "(primekit runs environments in this process)")
        if agent:
            raise _Refused(f"{where}.env.{seat}.{next(iter(agent))}: prime-rl agent key with no primekit counterpart")
    rest = [f"env.{k}" for k in env] + list(table)
    if rest:
        raise _Refused(f"{where}.{rest[0]}: prime-rl source key with no primekit counterpart")
    return out


def _tokenizer(work: dict[str, Any], notes: list[str]) -> None:
    """prime-rl's older ``trainer.tokenizer`` (a name, or a table with ``name``): the model's own tokenizer is
    what primekit uses, so the same name is accepted with a note and another one is refused, saying so."""
    value = dotted.get(work, "trainer.tokenizer")
    if value is dotted.MISSING:
        return
    dotted.pop(work, "trainer.tokenizer")
    name = value.get("name") if isinstance(value, dict) else value
    others = sorted(set(value) - {"name"}) if isinstance(value, dict) else []
    if others:
        raise _Refused(f"trainer.tokenizer.{others[0]}: prime-rl tokenizer setting with no primekit counterpart "
                       "(primekit samples and trains with the model's own tokenizer)")
    from evalkit.core.defaults import DEFAULT_MODEL

    model = work.get("model", DEFAULT_MODEL)
    if not isinstance(name, str) or name != model:
        raise _Refused(
            f"trainer.tokenizer = {name!r} differs from the model {model!r}: primekit samples and trains "
            "with the model's own tokenizer; remove trainer.tokenizer "
            "(or train a model that ships the tokenizer you want)"
        )
    notes.append(f"trainer.tokenizer: the model's own tokenizer ({name}), which primekit always uses")


def _put_list(work: dict[str, Any], key: str) -> None:
    *parents, last = key.split(".")
    node = work
    for part in parents:
        node = node[part]
    node[last] = [node[last]]


def _model_table(work: dict[str, Any]) -> None:
    """prime-rl's ``[model] name = ...`` is our ``model``; its other settings have no counterpart."""
    table = work.get("model")
    if not isinstance(table, dict):
        return
    del work["model"]
    others = [key for key in table if key != "name"]
    if others:
        raise _Refused(
            f"model.{others[0]}: prime-rl model setting with no primekit counterpart ([model] name is the model)"
        )
    if "name" in table:
        _put(work, "model", table["name"], "model.name")


def _apply(work: dict[str, Any], source: str, rule: Rule, notes: list[str]) -> None:
    value = dotted.get(work, source)
    if value is dotted.MISSING:
        return
    dotted.pop(work, source)
    _use(work, source, value, rule, notes)


def _use(work: dict[str, Any], source: str, value: Any, rule: Rule, notes: list[str]) -> None:
    if rule.refuse:
        raise _Refused(f"{source}: {rule.refuse}")
    reason = rule.check(value) if rule.check else None
    if reason:
        raise _Refused(f"{source} = {value!r}: {reason}")
    if rule.note:
        notes.append(f"{source}: no effect here ({rule.note})")
        return
    assert rule.to is not None
    converted = rule.convert(value) if rule.convert else value
    if converted is not SKIP:
        _put(work, rule.to, converted, source)


def _put(work: dict[str, Any], target: str, value: Any, source: str) -> None:
    """Set ``target``; a different value already there (the user's own key, another alias) is an error."""
    parts = target.split(".")
    node = work
    for part in parts[:-1]:
        child = node.get(part)
        if child is None or child is True:  # `lora = true` means the default adapter: a table can refine it
            child = node[part] = {}
        if not isinstance(child, dict):
            raise _Refused(f"{source} sets {target}, but {part} is {child!r} here; remove one of them")
        node = child
    last = parts[-1]
    if target in APPENDED:
        node[last] = [*node.get(last, []), *value]
        return
    if last in node and node[last] != value:
        raise _Refused(f"{source} and {target} set the same thing ({value!r} vs {node[last]!r}); keep one")
    node[last] = value


APPENDED = frozenset({"inference.server_args"})
"""Our keys that several foreign keys add to (each one a vLLM flag) rather than set."""


FOREIGN_TABLES = ("orchestrator", "monitors", "inference.vllm", "deployment", "run",
                  "trainer.optim", "trainer.scheduler", "trainer.model", "trainer.ckpt",
                  "inference.model", "inference.args")
"""Tables only another trainer's shape has: whatever is still in them after translation is refused by name."""


def _leftovers(work: dict[str, Any]) -> None:
    for table in FOREIGN_TABLES:
        value = dotted.get(work, table)
        if isinstance(value, dict) and value:
            key = f"{table}.{next(iter(_flat(value)))}"
            raise _Refused(f"{key}: prime-rl key with no primekit counterpart")
        if value == {}:
            dotted.pop(work, table)


def _flat(table: dict[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for key, value in table.items():
        out.extend(_flat(value, f"{prefix}{key}.") if isinstance(value, dict) and value else [f"{prefix}{key}"])
    return out


def _gpu_counts(work: dict[str, Any], notes: list[str]) -> None:
    """GPU counts (vf-rl's ``[inference] gpus = N`` / ``[trainer] gpus = N``, the quick start's ``num_gpus`` and
    ``tensor_parallel_size``) as the indices primekit takes: inference first, then the trainer's one GPU."""
    inference, trainer = dotted.get(work, "inference.gpus"), dotted.get(work, "trainer.gpus")
    if isinstance(trainer, int) and not isinstance(trainer, bool) and not isinstance(inference, int):
        if trainer != 1:
            raise _Refused(f"trainer.gpus = {trainer}: {MULTI_GPU}")
        dotted.pop(work, "trainer.gpus")  # one GPU, the default placement
    elif isinstance(inference, int) and not isinstance(inference, bool):
        dotted.pop(work, "inference.gpus")
        trainer_count = trainer if isinstance(trainer, int) and not isinstance(trainer, bool) else 1
        if trainer_count != 1:
            raise _Refused(f"trainer.gpus = {trainer_count}: {MULTI_GPU}")
        if isinstance(trainer, int):
            dotted.pop(work, "trainer.gpus")
        _put(work, "inference.gpus", list(range(inference)), "inference.gpus")
        _put(work, "trainer.gpus", [inference], "trainer.gpus")
    total, parallel = work.pop("num_gpus", None), work.pop("tensor_parallel_size", None)
    if total is None and parallel is None:
        return
    total = total if total is not None else (parallel or 1) + 1
    parallel = parallel or 1
    if total == 1 and parallel == 1:
        layout = ([0], [0])
    elif parallel > total - 1:
        raise _Refused(f"tensor_parallel_size = {parallel} leaves none of num_gpus = {total} for the trainer; "
                       f"use at most {max(1, total - 1)}")
    else:
        layout = (list(range(parallel)), [parallel])
    _put(work, "inference.gpus", layout[0], "num_gpus")
    _put(work, "trainer.gpus", layout[1], "num_gpus")
    idle = total - len(set(layout[0]) | set(layout[1]))
    if idle > 0:
        notes.append(f"num_gpus = {total}: vLLM on GPU {','.join(map(str, layout[0]))} (tensor parallel {parallel}), "
                     f"the trainer on GPU {layout[1][0]}; {idle} GPU(s) stay idle ({MULTI_GPU})")


def _server_args(work: dict[str, Any], notes: list[str]) -> None:
    """vf-rl's ``[inference.args]``: vLLM server options, as command-line flags (the tool-call parser as ours)."""
    args = dotted.get(work, "inference.args")
    if args is dotted.MISSING:
        return
    dotted.pop(work, "inference.args")
    flags: list[str] = []
    for key, value in args.items():
        if key == "tool_call_parser":
            _put(work, "inference.tool_call_parser", value, "inference.args.tool_call_parser")
        elif key == "enable_auto_tool_choice":
            notes.append(
                "inference.args.enable_auto_tool_choice: no effect here "
                "(passed whenever inference.tool_call_parser is set)"
            )
        elif value is True:
            flags.append(f"--{key.replace('_', '-')}")
        elif value is not False:
            flags.extend([f"--{key.replace('_', '-')}", str(value)])
    if flags:
        _put(work, "inference.server_args", flags, "inference.args")


def _check_off_policy(work: dict[str, Any], notes: list[str]) -> None:
    """prime-rl's ``max_off_policy_steps`` discards batches older than that; primekit's are never older than
    the async level, so it only has to be at least that."""
    limit: Any = dotted.MISSING
    for key in ("orchestrator.max_off_policy_steps", "max_off_policy_steps"):
        if dotted.get(work, key) is not dotted.MISSING:
            limit = dotted.get(work, key)
            dotted.pop(work, key)
    if limit is dotted.MISSING:
        return
    level = dotted.get(work, "trainer.async_level")
    level = 1 if level is dotted.MISSING else level
    if not isinstance(limit, int) or limit < level:
        raise _Refused(f"max_off_policy_steps = {limit!r} is below the async level ({level}): every batch would be "
                       "discarded; raise it or lower max_async_level")
    notes.append(f"max_off_policy_steps = {limit}: no effect here (batches are never more than {level} step(s) behind)")
