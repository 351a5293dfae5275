"""RL fine-tuning behind `prime rl run`: baseline checks, then a GRPO-style trainer.

Entry points: :func:`rl_backend.config.load_rl_config` (TOML + dotted overrides -> :class:`RLConfig`,
no torch import) and :func:`rl_backend.runner.run` (plan, baseline, train). Algorithms are small
named classes in plain registries: :data:`rl_backend.advantages.ADVANTAGES`,
:data:`rl_backend.losses.LOSSES`. Rollouts come from a :class:`rl_backend.sources.base.RolloutSource`
(the in-process torch sampler, or a vLLM server with hot-loaded LoRA adapters).
"""
