"""Built-in environments: fully offline, data generated from a seed or shipped in ``data/``.

Each module exposes ``load_environment(num_train_examples=..., num_eval_examples=..., seed=..., ...)``
and is found by id through :mod:`evalkit.loading.resolve` (``reverse-text`` -> ``evalkit.builtin.reverse_text``;
the list of ids is ``evalkit.loading.resolve.BUILTIN_IDS``). Importing this package imports no environment.
"""
