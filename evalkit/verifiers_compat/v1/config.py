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
``--env.agent.<knob>``) or its harness program's config (``id``, ``tool_timeout``, ``env``, ``forward_env``,
``disabled_tools``, and the ``bash`` program's ``edit``/``compaction``...: ``--env.agent.harness.<knob>``). Any
other key is a UserError naming both lists. A ``runtime`` part (``[env.agent.runtime]``: ``{"type":
"sandbox"}`` or ``"subprocess"``, with the limits beside ``type``: both take the same,
:mod:`~evalkit.verifiers_compat.v1.limits`) is the user's explicit choice of the runtime: verifiers is always told
``subprocess``, and ``sandbox`` picks primekit's sandboxed harness plugins.

Seats: the env's config class (``vf.env_config_type``: ``SingleAgentEnvConfig`` with its one ``agent`` seat for a
plain taskset, the taskset's own ``EnvConfig`` subclass for a multi-agent ``Env``) declares each seat as an
``AgentConfig`` field. Every seat runs offline on one of primekit's harness plugins (verifiers' ``null`` chat
program by default, or verifiers' ``bash`` harness, see :mod:`~evalkit.verifiers_compat.v1.harness`) on the
``subprocess`` runtime, and plays the run's model through the run's client (a seat's own ``model``/``client``
pins are dropped: primekit's client is the only model here). ``bash`` runs the model's shell commands on this
machine, so it runs only when the env args choose the runtime (``"runtime": {"type": "subprocess"}``); otherwise
one UserError says how to opt in. Any other program (``codex``, ``rlm``, ...; verifiers runs them only in a
container) is one UserError saying what it needs. A taskset that ships its own harness (verifiers runs unpinned
seats on it) is refused too, unless the env args name a program (``{"harness": {"id": "null"}}``): the rows
would differ from verifiers' without that choice.
"""

from __future__ import annotations

from typing import Any

from evalkit.core.errors import UserError
from evalkit.verifiers_compat.v1.harness import BASH_HARNESS_ID, HARNESS_ID

SEAT_KNOBS = ("max_turns", "max_input_tokens", "max_output_tokens", "max_total_tokens", "timeout", "retries")
"""``harness`` knobs that are a seat's own (``AgentConfig`` fields in verifiers)."""
PROGRAMS = {"null": HARNESS_ID, HARNESS_ID: HARNESS_ID, "bash": BASH_HARNESS_ID, BASH_HARNESS_ID: BASH_HARNESS_ID}
"""The harness programs primekit runs offline: verifiers' id (or primekit's plugin id) -> primekit's plugin id."""
OFFLINE_HARNESSES = ("null", "bash")
"""verifiers' ids of the programs in :data:`PROGRAMS`, as the messages name them."""
RUNTIME = "subprocess"
"""The runtime verifiers is told (the user's machine); ``sandbox`` runs on it through primekit's harness plugins."""
SANDBOX = "sandbox"
"""primekit's bubblewrap runtime (:mod:`~evalkit.verifiers_compat.v1.sandbox`): what the bash opt-in recommends."""
RUNTIMES = (RUNTIME, SANDBOX)
PARTS = ("taskset", "harness", "runtime")


def split_env_args(env_id: str, env_args: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``(taskset knobs, harness knobs, runtime)`` from env args in any of the three shapes (see the module
    docstring)."""
    args = dict(env_args)
    nested = args.pop("config", None)
    if nested is not None:
        if not isinstance(nested, dict) or set(nested) - set(PARTS):
            raise UserError(f"env args of v1 taskset '{env_id}': 'config' must be an object with 'taskset', "
                            f"'harness' and/or 'runtime' objects, got {nested!r}")
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
    return {**args, **parts["taskset"]}, parts["harness"], parts["runtime"]


def env_config_data(env_id: str, taskset_id: str, env_args: dict[str, Any]) -> dict[str, Any]:
    """The ``[env]`` data verifiers validates (``vf.resolve_env_config``) for taskset module ``taskset_id``."""
    import verifiers.v1 as vf

    flat, harness, runtime = split_env_args(env_id, env_args)
    check_runtime(f"v1 taskset '{env_id}'", runtime.get("type", RUNTIME), set(runtime) - {"type"}, runtime)
    seat_knobs = {k: v for k, v in harness.items() if k in SEAT_KNOBS}
    program_knobs = {k: v for k, v in harness.items() if k not in SEAT_KNOBS}
    chosen = program_knobs.pop("id", None)
    checked = HARNESS_ID if chosen is None else offline_program(f"v1 taskset '{env_id}'", chosen, runtime)
    _check_program_knobs(env_id, checked, program_knobs)
    config_cls = vf.env_config_type(taskset_id)
    env_knobs = _env_knobs(flat, config_cls, vf.taskset_config_type(taskset_id))
    data: dict[str, Any] = {**env_knobs, "taskset": {"id": taskset_id, **flat}}
    for name, seat in seats(config_cls).items():
        if seat.harness is None and chosen is None:
            _refuse_bundled_harness(env_id, taskset_id)
        data[name] = {
            **seat_knobs,
            "harness": {**_seat_program(env_id, name, seat, chosen, runtime), **program_knobs},
            "runtime": {"type": RUNTIME},
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


def _seat_program(env_id: str, seat: str, agent: Any, chosen: str | None, runtime: dict[str, Any]) -> dict[str, Any]:
    """A seat's harness: primekit's plugin for the program the user chose (else the one the seat pins, else
    ``null``), with the seat's pinned knobs when it pins that same program; UserError for one that cannot run."""
    pinned = agent.harness
    name = chosen if chosen is not None else (pinned.id if pinned is not None else "null")
    plugin = offline_program(f"v1 taskset '{env_id}': seat '{seat}'", name, runtime)
    knobs: dict[str, Any] = {}
    if pinned is not None and PROGRAMS.get(pinned.id) == plugin:
        knobs = pinned.model_dump(exclude_unset=True)
    if runtime.get("type") == SANDBOX:
        from evalkit.verifiers_compat.v1.sandbox_config import sandbox_program

        return {**knobs, **sandbox_program(plugin, runtime)}
    return {**knobs, "id": plugin, "limits": subprocess_limits(runtime)}


def subprocess_limits(runtime: dict[str, Any]) -> dict[str, int]:
    """The limits of a harness run on ``subprocess``: the runtime's knobs beside ``type``, the sandbox's defaults
    for the rest (:mod:`~evalkit.verifiers_compat.v1.limits`)."""
    from evalkit.sandbox.bwrap import Limits

    knobs = {k: v for k, v in runtime.items() if k != "type"}
    return Limits.from_knobs("runtime", knobs, runtime=RUNTIME).as_dict()


def offline_program(where: str, harness_id: Any, runtime: dict[str, Any]) -> str:
    """primekit's plugin id for verifiers' harness ``harness_id``; UserError (one line saying what it needs) for a
    program primekit does not run, or for one that runs the model's commands on a runtime the user did not choose."""
    plugin = PROGRAMS.get(harness_id) if isinstance(harness_id, str) else None
    if plugin is None:
        raise UserError(f"{where}: {refusal(harness_id)}")
    if plugin == BASH_HARNESS_ID and "type" not in runtime:
        raise UserError(
            f"{where}: the 'bash' harness runs the model's shell commands on this machine, so it runs only on a "
            f"runtime you choose: add [env.agent.runtime] type = \"{SANDBOX}\" (--env.agent.runtime.type {SANDBOX}; "
            f"""with -a: "runtime": {{"type": "{SANDBOX}"}}: isolated by bubblewrap), or type = "{RUNTIME}" (the """
            "commands run as you, with your files)")
    return plugin


def refusal(harness_id: Any) -> str:
    """Why primekit does not run verifiers' harness ``harness_id``, and what it would need (for one error line)."""
    from verifiers.v1.utils.loaders import builtin_harness_ids, harness_class

    runs = f"primekit runs the {' and '.join(OFFLINE_HARNESSES)} harnesses, on the local {RUNTIME} runtime"
    if harness_id in builtin_harness_ids():
        try:
            needs_container = harness_class(harness_id).NEEDS_CONTAINER
        except (ImportError, AttributeError, TypeError, ValueError):
            needs_container = False
        if needs_container:
            return (f"harness '{harness_id}' runs only in a container (verifiers marks it NEEDS_CONTAINER): it "
                    f"needs the docker runtime with a docker daemon, or a hosted modal/prime sandbox (an account), and "
                    f"installs its program there from the network; {runs}")
    return f"harness '{harness_id}' cannot run in primekit; {runs}"


def check_runtime(where: str, runtime_type: Any, extra: set[str] | frozenset[str] = frozenset(),
                  knobs: dict[str, Any] | None = None) -> None:
    """UserError for a runtime other than the local subprocess and sandbox ones, saying what it would need (for
    ``sandbox``: bad limit knobs, or bwrap missing or unable to run here)."""
    if runtime_type == RUNTIME:
        from evalkit.sandbox.bwrap import Limits

        Limits.from_knobs(where, {k: v for k, v in (knobs or {}).items() if k in extra}, runtime=RUNTIME)
        return
    if runtime_type == SANDBOX:
        from evalkit.verifiers_compat.v1.sandbox_config import check_sandbox

        check_sandbox(where, {k: v for k, v in (knobs or {}).items() if k in extra})
        return
    if runtime_type != RUNTIME:
        docker = (
            "a docker daemon (one answers here, but primekit does not drive the docker runtime yet)"
            if runtime_type == "docker" and _docker_answers()
            else "a docker daemon (`docker info` does not answer here)"
        )
        needs = {"docker": docker, "modal": "a Modal account", "prime": "a Prime Intellect account (hosted sandboxes)"}
        need = needs.get(str(runtime_type), "a runtime primekit does not run")
        raise UserError(f"{where}: runtime '{runtime_type}' needs {need}; primekit runs harness programs on the local "
                        f"'{SANDBOX}' and '{RUNTIME}' runtimes: set [env.agent.runtime] type = \"{SANDBOX}\"")


def _docker_answers() -> bool:
    """Whether a docker daemon answers ``docker info`` here (only asked on the way to a refusal)."""
    import shutil
    import subprocess

    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=15).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _refuse_bundled_harness(env_id: str, taskset_id: str) -> None:
    """UserError when the taskset ships its own harness: verifiers runs an unpinned seat on it, so running the
    chat program instead would give other rows than verifiers, and must be the user's explicit choice."""
    from verifiers.v1.utils.loaders import default_harness_id

    if default_harness_id(taskset_id) == taskset_id:
        raise UserError(
            f"v1 taskset '{env_id}' ships its own harness program (a Harness in module '{taskset_id}'), which "
            "verifiers runs by default and primekit cannot run offline; to run its tasks on verifiers' null chat "
            """program instead, pass -a '{"harness": {"id": "null"}}' ([env.harness] id = "null")""")


def _check_program_knobs(env_id: str, plugin: str, knobs: dict[str, Any]) -> None:
    """UserError for a harness setting the chosen program's config (verifiers' own class) does not have."""
    from verifiers.v1.utils.loaders import harness_config_type

    program = set(harness_config_type(plugin).model_fields) - {"id"}
    unknown = sorted(set(knobs) - program)
    if unknown:
        raise UserError(
            f"v1 taskset '{env_id}': unknown harness setting(s) {unknown}; a [env.harness] table takes a seat's "
            f"limits ({', '.join(SEAT_KNOBS)}) and the harness program's settings ({', '.join(sorted(program))})")
