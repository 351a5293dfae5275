"""``prime env check``: is this environment's reward honest? See docs/env-check.md.

:mod:`~evalkit.envcheck.policies` (the scripted replies), :mod:`~evalkit.envcheck.probe` (rolling them
out), :mod:`~evalkit.envcheck.judge` (the checks on what they scored), :mod:`~evalkit.envcheck.model_rules`
(the baseline rules of thumb on a real model), :mod:`~evalkit.envcheck.render` (table and JSON).
"""
