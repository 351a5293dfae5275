"""Built-in environments: fully offline, data generated from a seed or shipped in ``data/``.

Each module exposes ``load_environment(num_train_examples=..., num_eval_examples=..., seed=..., ...)``
and is found by id through :mod:`evalkit.registry` (``reverse-text`` -> ``evalkit.builtin.reverse_text``).
Importing this package imports no environment, so ``prime --help`` stays fast.
"""

BUILTIN_MODULES = ("reverse_text", "alphabet_sort", "arithmetic", "wordle", "fact_search")
