"""Secrets in a system prompt stay out of what the gepa library holds, saves and shows the teacher.

An environment may build its system prompt from its arguments, and an argument may carry a secret (a value of
the run's ``--env-file``, the model's key): the seed candidate then holds it, and gepa writes its candidates to
``state/candidates.json`` and pickles them into ``state/gepa_state.bin`` itself, outside primekit's writers, and
sends them to the teacher. So the library only ever sees the *hidden* text: each registered secret
(:mod:`evalkit.core.redact`) that occurs in the seed becomes a numbered placeholder, ``[redacted:1]``, ``[redacted:2]``
(numbered longest value first, ties by value: the same seed and secrets give the same text, so a resumed run
finds its saved seed), and any other registered secret in a proposal becomes ``[redacted]``. Rollouts run the
*revealed* text (placeholders back to their values), so the task model sees the prompt the environment wrote.
A seed without secrets is left as it is, and nothing changes.
"""

from __future__ import annotations

from evalkit.core.redact import REDACTED, registered_secrets, scrub_secrets


class SecretMask:
    """Hides the secrets of one seed prompt behind placeholders and reveals them again (module docstring)."""

    def __init__(self, seed: str):
        found = sorted((value for value in registered_secrets() if value in seed), key=lambda v: (-len(v), v))
        self._pairs = [(value, f"{REDACTED[:-1]}:{index}]") for index, value in enumerate(found, start=1)]

    def hide(self, text: str) -> str:
        """``text`` as the library may hold it: the seed's secrets as placeholders, any other secret redacted."""
        for value, placeholder in self._pairs:
            text = text.replace(value, placeholder)
        return scrub_secrets(text)

    def reveal(self, text: str) -> str:
        """``text`` as rollouts run it: every placeholder back to its value."""
        for value, placeholder in self._pairs:
            text = text.replace(placeholder, value)
        return text
