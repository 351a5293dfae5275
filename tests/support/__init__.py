"""What the tests share: fake servers, a scripted client, tiny models, report fixtures, and the paths below."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
"""The tests folder."""
REPO = TESTS.parent
"""The repository root."""
VERIFIERS_ENVS = TESTS / "verifiers_envs"
"""Environments written for verifiers, used as test data."""
