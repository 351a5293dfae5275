"""verifiers 0.4's dotted flags on environments that are not v1 tasksets (primekit's own, legacy verifiers ones).

A verifiers 0.4 user types ``--sampling.temperature 0.5`` or ``--client.base-url URL`` out of habit. Those flags
mean the same for any environment, so on a primekit or legacy environment they become primekit's own fields:

- ``--sampling.<key>``: a sampling setting (``-S '{"<key>": ...}'``);
- ``--client.base-url`` / ``--client.api-key-var`` / ``--client.headers``: ``-b`` / ``-k`` / ``--header``;
- ``--select.limit`` / ``--select.shuffle`` / ``--select.seed``: ``-n`` / ``--shuffle`` / ``--shuffle-seed``.

Rollouts, concurrency and ``--dry-run`` are primekit's flags already (``-r``, ``-c``). Every other dotted flag
describes a v1 taskset's run config (``--env.*``, ``--run.*``, ...) and gets one line saying so. primekit's own
flags win over these, as they do over a verifiers run config.
"""

from __future__ import annotations

import json
from typing import Any

from evalkit.core.errors import UserError

SAMPLING = "sampling"
CLIENT_FIELDS = {"base_url": "base_url", "api_key_var": "api_key_var", "headers": "headers"}
"""``--client.<key>`` -> the EvalConfig field."""
SELECT_FIELDS = {"limit": "num_examples", "shuffle": "shuffle", "seed": "seed"}
"""``--select.<key>`` -> the EvalConfig field."""


def applies(target: str | None, files: list[str], env_dir: str) -> bool:
    """Whether a command line's dotted flags are read here: an environment id (no config file) that is not a
    verifiers v1 taskset. Anything else stays verifiers' run-config dialect."""
    if target is None or files or target.endswith((".toml", ".json")):
        return False
    return not _is_v1_taskset(target, env_dir)


def fields(env_id: str, overrides: list[tuple[str, Any]]) -> dict[str, Any]:
    """The EvalConfig fields the dotted ``overrides`` mean (see the module docstring); UserError for the others."""
    found: dict[str, Any] = {}
    for key, value in overrides:
        parts = [part.replace("-", "_") for part in key.split(".")]
        head, rest = parts[0], ".".join(parts[1:])
        if head == SAMPLING and len(parts) == 2 and rest:
            found.setdefault("sampling", {})[rest] = _scalar(value)
        elif head == "client" and rest in CLIENT_FIELDS:
            found[CLIENT_FIELDS[rest]] = _headers(value) if rest == "headers" else value
        elif head == "select" and rest in SELECT_FIELDS:
            found[SELECT_FIELDS[rest]] = _scalar(value)
        else:
            raise UserError(f"--{key} is a setting of a verifiers v1 taskset's run config, and '{env_id}' is not a "
                            "v1 taskset; here --sampling.*, --client.* (base-url, api-key-var, headers) and --select.* "
                            "(limit, shuffle, seed) apply, beside primekit's flags (-a '{...}' for its arguments)")
    return found


def laid_under(dotted: dict[str, Any], flags: dict[str, Any]) -> dict[str, Any]:
    """primekit's ``flags`` over the ``dotted`` fields; the ``sampling`` objects merge key by key."""
    merged = {**dotted, **flags}
    if "sampling" in dotted and "sampling" in flags:
        merged["sampling"] = {**dotted["sampling"], **flags["sampling"]}
    return merged


def _scalar(value: Any) -> Any:
    """A flag's text as the number, boolean or null it spells (``"0.5"`` -> 0.5), else the text itself."""
    if not isinstance(value, str):
        return value
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        return value
    return parsed if parsed is None or isinstance(parsed, (bool, int, float)) else value


def _headers(value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise UserError("--client.headers must be a JSON object of strings, e.g. '{\"X-Team\": \"a\"}'")
    return dict(value)


def _is_v1_taskset(env_id: str, env_dir: str) -> bool:
    """Whether ``env_id`` resolves to a module exporting a verifiers v1 Taskset. One that does not resolve or import
    counts as one: the dialect's path then says what is wrong, as it did."""
    from evalkit.loading.resolve import import_env_module, resolve
    from evalkit.verifiers_compat.v1.loader import taskset_class_of

    try:
        source = resolve(env_id, env_dir)
        if source.origin == "builtin":
            return False
        return taskset_class_of(import_env_module(source)) is not None
    except UserError:
        return True
