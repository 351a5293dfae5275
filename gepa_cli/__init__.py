"""GEPA for primekit: optimizes an environment's system prompt with the ``gepa`` library.

The job (:mod:`gepa_cli.runner`), its config, the rollout budget, the adapter that scores candidates
through the eval runner, the reflection LM over primekit's client layer, and the run's output files.
The ``prime gepa`` command that drives it lives in :mod:`primekit_cli.commands.gepa_cmd`.
"""
