"""The rules of thumb for "is there anything to learn here?", declared once.

The training docs' first rule is to look at the starting model's rewards before RL: a mean near 0 gives
nothing to reinforce, a mean near the top teaches little, and groups whose rollouts all score alike give
zero advantages. The RL baseline gate (``rl_backend.baseline``, ``[baseline]`` in an RL config) refuses
to train past these thresholds, and ``prime env check`` reports an environment against the same ones;
both read them from here so the two never disagree.
"""

from __future__ import annotations

MIN_REWARD = 0.01
"""Below this mean reward the task is too hard for the model: nothing to reinforce."""

MAX_REWARD = 0.8
"""Above this mean reward the task is too easy to learn much from."""

MIN_DIVERSE_GROUPS = 0.1
"""The least fraction of groups (rollouts of one example) whose rewards are not all identical."""
