"""The verifiers v1 env config primekit builds for a taskset: env args -> ``[env]`` data for ``vf.resolve_env_config``.

Env args (``-a``, ``args``/``env_args`` in TOML) take three shapes, all meaning the same config:

- flat: ``{"num_tasks": 5}``: the taskset's config knobs (verifiers' ``--env.taskset.<knob>``); a knob that a
  multi-agent env's own config declares and the taskset's does not is the env's (``--env.<knob>``);
- by part: ``{"taskset": {...}, "harness": {...}}``, what the ``[env.taskset]`` / ``[env.harness]`` TOML tables
  (``[eval.taskset]`` / ``[eval.harness]`` in an eval file) become; flat knobs may sit beside them;
- under ``config``: ``{"config": {"taskset": {...}, "harness": {...}}}``, as the Lab's configs README writes
  one-off overrides.

``harness`` knobs go where verifiers keeps them, on every seat: a seat's own limits (``max_turns``,
``max_input_tokens``, ``max_output_tokens``, ``max_total_tokens``, ``timeout``, ``retries``: verifiers'
``--env.agent.<knob>``) or its harness program's config (``tool_timeout``, ``env``, ``forward_env``,
``disabled_tools``: ``--env.agent.harness.<knob>``). Any other key is a UserError naming both lists.

Seats: the env's config class (``vf.env_config_type``: ``SingleAgentEnvConfig`` with its one ``agent`` seat for a
plain taskset, the taskset's own ``EnvConfig`` subclass for a multi-agent ``Env``) declares each seat as an
``AgentConfig`` field. Every seat runs offline on primekit's harness (verifiers' ``null`` chat program, see
:mod:`~evalkit.verifiers_compat.v1_harness`) on the ``subprocess`` runtime, and plays the run's model through the
run's client (a seat's own ``model``/``client`` pins are dropped: primekit's client is the only model here). A seat
pinned to another harness program (``bash``, ``codex``, ...) cannot run offline: one UserError says which. A
taskset that ships its own harness (verifiers runs unpinned seats on it) is refused too, unless the env args name
the chat program (``{"harness": {"id": "null"}}``): the rows would differ from verifiers' without that choice.
"""

from __future__ import annotations

from typing import Any

from evalkit.core.errors import UserError
from evalkit.verifiers_compat.v1_harness import HARNESS_ID

SEAT_KNOBS = ("max_turns", "max_input_tokens", "max_output_tokens", "max_total_tokens", "timeout", "retries")
"""``harness`` knobs that are a seat's own (``AgentConfig`` fields in verifiers)."""
OFFLINE_HARNESSES = ("null", HARNESS_ID)
"""Harness ids a seat may pin: verifiers' ``null`` chat program is what primekit's harness runs offline."""
PARTS = ("taskset", "harness")


def split_env_args(env_id: str, env_args: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(taskset knobs, harness knobs)`` from env args in any of the three shapes (see the module docstring)."""
    args = dict(env_args)
    nested = args.pop("config", None)
    if nested is not None:
        if not isinstance(nested, dict) or set(nested) - set(PARTS):
            raise UserError(f"env args of v1 taskset '{env_id}': 'config' must be an object with 'taskset' and/or "
                            f"'harness' objects, got {nested!r}")
        for part in PARTS:
            if part in nested and part in args:
                raise UserError(f"env args of v1 taskset '{env_id}': '{part}' is given twice (top level and under "
                                "'config'); give it once")
        args.update(nested)
    parts: dict[str, dict[str, Any]] = {}
    for part in PARTS:
        value = args.pop(part, {})
        if not isinstance(value, dict):
            raise UserError(f"env args of v1 taskset '{env_id}': '{part}' must be an object (a [env.{part}] table), "
                            f"got {value!r}")
        parts[part] = dict(value)
    twice = sorted(set(args) & set(parts["taskset"]))
    if twice:
        raise UserError(f"env args of v1 taskset '{env_id}': {twice} set both as env args and in 'taskset'; set once")
    return {**args, **parts["taskset"]}, parts["harness"]


def env_config_data(env_id: str, taskset_id: str, env_args: dict[str, Any]) -> dict[str, Any]:
    """The ``[env]`` data verifiers validates (``vf.resolve_env_config``) for taskset module ``taskset_id``."""
    import verifiers.v1 as vf

    flat, harness = split_env_args(env_id, env_args)
    seat_knobs = {k: v for k, v in harness.items() if k in SEAT_KNOBS}
    program_knobs = {k: v for k, v in harness.items() if k not in SEAT_KNOBS}
    chose_chat_program = "id" in program_knobs
    _check_program_knobs(env_id, program_knobs)
    config_cls = vf.env_config_type(taskset_id)
    env_knobs = _env_knobs(flat, config_cls, vf.taskset_config_type(taskset_id))
    data: dict[str, Any] = {**env_knobs, "taskset": {"id": taskset_id, **flat}}
    for name, seat in seats(config_cls).items():
        if seat.harness is None and not chose_chat_program:
            _refuse_bundled_harness(env_id, taskset_id)
        data[name] = {
            **seat_knobs,
            "harness": {**_pinned_program(env_id, name, seat), **program_knobs, "id": HARNESS_ID},
            "runtime": {"type": "subprocess"},
            "model": None,
            "client": None,
        }
    return data


def _env_knobs(flat: dict[str, Any], config_cls: type, taskset_cls: type) -> dict[str, Any]:
    """Take out of ``flat`` the knobs of the env itself (fields its own ``EnvConfig`` subclass declares, that
    the taskset's config does not: ``--env.<knob>`` in verifiers' CLI); the rest stays the taskset's."""
    from verifiers.v1 import EnvConfig

    own = set(config_cls.model_fields) - set(EnvConfig.model_fields) - set(seats(config_cls))
    return {key: flat.pop(key) for key in list(flat) if key in own and key not in taskset_cls.model_fields}


def seats(config_cls: type) -> dict[str, Any]:
    """The seats an env config class declares: its ``AgentConfig`` fields (default instances), in order."""
    from verifiers.v1 import AgentConfig

    return {name: field.default for name, field in config_cls.model_fields.items()
            if isinstance(field.default, AgentConfig)}


def _pinned_program(env_id: str, seat: str, agent: Any) -> dict[str, Any]:
    """A seat's pinned harness knobs (kept on primekit's harness); UserError for a program that cannot run here."""
    pinned = agent.harness
    if pinned is None:
        return {}
    if pinned.id not in OFFLINE_HARNESSES:
        raise UserError(
            f"v1 taskset '{env_id}': seat '{seat}' pins the '{pinned.id}' harness, which primekit cannot run: "
            f"every seat runs offline on verifiers' null chat program (harness ids {', '.join(OFFLINE_HARNESSES)})")
    knobs = pinned.model_dump(exclude_unset=True)
    knobs.pop("id", None)
    return knobs


def _refuse_bundled_harness(env_id: str, taskset_id: str) -> None:
    """UserError when the taskset ships its own harness: verifiers runs an unpinned seat on it, so running the
    chat program instead would give other rows than verifiers, and must be the user's explicit choice."""
    from verifiers.v1.utils.loaders import default_harness_id

    if default_harness_id(taskset_id) == taskset_id:
        raise UserError(
            f"v1 taskset '{env_id}' ships its own harness program (a Harness in module '{taskset_id}'), which "
            "verifiers runs by default and primekit cannot run offline; to run its tasks on verifiers' null chat "
            """program instead, pass -a '{"harness": {"id": "null"}}' ([env.harness] id = "null")""")


def _check_program_knobs(env_id: str, knobs: dict[str, Any]) -> None:
    from verifiers.v1.harnesses.null.harness import NullHarnessConfig

    if "id" in knobs and knobs["id"] not in OFFLINE_HARNESSES:
        raise UserError(f"v1 taskset '{env_id}': harness id '{knobs['id']}' cannot run in primekit; every seat runs "
                        f"offline on verifiers' null chat program (drop the id, or use {' or '.join(OFFLINE_HARNESSES)})")
    knobs.pop("id", None)
    program = set(NullHarnessConfig.model_fields) - {"id"}
    unknown = sorted(set(knobs) - program)
    if unknown:
        raise UserError(
            f"v1 taskset '{env_id}': unknown harness setting(s) {unknown}; a [env.harness] table takes a seat's "
            f"limits ({', '.join(SEAT_KNOBS)}) and the chat program's settings ({', '.join(sorted(program))})")
