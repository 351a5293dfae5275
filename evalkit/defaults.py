"""The defaults every part shares (eval, GEPA, RL, the CLI's ``--help``), each written once.

A bottom module: it imports nothing, so the client layer, the engine, the configs and the CLI can all
read it without an import going upward, and building the command line stays instant.
"""

DEFAULT_MODEL = "local/smollm2-135m"
"""The embedded model used when no model and no base URL are given (the only copy of this name)."""

DEFAULT_MAX_CONCURRENT = 32
"""Rollouts in flight at once in ``prime eval run`` and ``prime gepa run`` (``-c/--max-concurrent``)."""

DEFAULT_TIMEOUT_S = 600.0
"""Seconds one model request may take, the whole reply included (the ``openai`` SDK's default)."""

DEFAULT_MAX_RETRIES = 3
"""Retries of a model request that failed with 429, 5xx, a timeout or a dropped connection."""

DEFAULT_SCORE_TIMEOUT_S = 120.0
"""Seconds the scoring of one rollout (all its reward functions) may take before it records an error."""
