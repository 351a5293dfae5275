"""The environment a harness child gets: an allowlist, not primekit's environment minus some names.

verifiers' subprocess runtime hands a program this process's whole environment minus the names holding
``API_KEY``, so ``HF_TOKEN``, ``GITHUB_TOKEN``, cloud credentials and every ``--env-file`` value under another name
reach harness code. A harness child here gets only:

- :data:`BASE_ENV`, what a Python child needs to run (finding the interpreter's packages, a home, a locale, a
  temporary folder, certificates), taken from the environment it was started with;
- the variables the harness declares (verifiers' ``process_env(env)``: the runtime-wide ``env`` of the task, the
  harness config's ``env`` and the host variables named in its ``forward_env``), whose names travel in
  :data:`DECLARED` beside them (:func:`declare`).

A run that arrives without :data:`DECLARED` gets the base alone. Standard library only: ``launcher.py`` and
``forkserver.py`` import it as a sibling module (they run by path), primekit as part of the package.
"""

from __future__ import annotations

BASE_ENV = ("PATH", "HOME", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "TZ", "TERM", "USER", "LOGNAME",
            "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV", "SSL_CERT_FILE", "SSL_CERT_DIR")
"""Variables every harness child (and the fork server) may get from its parent: nothing secret."""
DECLARED = "PRIMEKIT_HARNESS_DECLARED_ENV"
"""Holds the comma-separated names of the variables the harness declared for this run."""


def declare(env: dict[str, str]) -> dict[str, str]:
    """``env`` (what the harness declares for a run) with the list of its names, for :func:`allowed`."""
    return {**env, DECLARED: ",".join(name for name in env if name != DECLARED)}


def allowed(env: dict[str, str]) -> dict[str, str]:
    """The part of ``env`` a harness child may see: :data:`BASE_ENV`, the names :data:`DECLARED` lists, and
    :data:`DECLARED` itself (names only), so applying this again (launcher, then server) keeps the same."""
    keep = {*BASE_ENV, DECLARED, *filter(None, env.get(DECLARED, "").split(","))}
    return {name: value for name, value in env.items() if name in keep}
