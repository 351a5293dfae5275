"""verifiers 0.4's run configs (``vf-eval`` / ``vf-gepa``: ``@ config.toml``, a taskset id, dotted overrides),
validated by verifiers' own config classes and translated into primekit's eval and GEPA fields.

No copy of verifiers' schema lives here: the raw data (:mod:`~primekit_cli.dialect.args`) goes to
``verifiers.v1.configs.cli.eval.EvalConfig`` or ``verifiers.v1.gepa.GEPAConfig``, which narrow ``[env]`` to the
taskset's own env config class and refuse unknown keys. Only then does primekit read the validated object.

What the translation does with each part (the house style of :mod:`rl_backend.config_shapes`: mapped, a no-op
with a note, or refused in one line):

- mapped: ``model``, ``[client]`` (``base_url``, ``api_key_var``, ``headers``), ``[sampling]``, ``num_rollouts``,
  ``max_concurrent``, ``[select]`` ``limit``/``shuffle``/``seed`` (and the top-level ``num_tasks``/``shuffle``
  of verifiers' own ``configs/`` files, which the installed release spells ``select.*``), ``output_dir``,
  ``[env.taskset]`` knobs, env-level knobs of a taskset's own env, a seat's limits (``max_turns``, token caps,
  ``timeout``, ``retries``) and its ``null`` harness settings, ``[env.timeout] episode`` (``rollout_timeout``);
  GEPA's ``max_total_rollouts``, ``reflection_minibatch_size``, ``reflection_columns``, ``reflection_model``,
  ``initial_prompt``, ``num_train``, ``num_val``, ``seed``.
- a note, no effect: ``push`` (runs stay local), ``[serve]`` (the env runs in-process), ``[rich]``, ``run.name``
  / ``run.dir`` (primekit names its run dirs), a seat's ``model``/``client``/``sampling`` pins (the run's model
  plays every seat), an unset harness or runtime (verifiers' defaults are the ``bash`` harness on the hosted
  ``prime`` sandbox; primekit runs verifiers' ``null`` chat program as a local subprocess).
- mapped too: ``[env.agent.harness] id = "bash"`` (with its ``edit``/``compaction``/... keys), which runs only
  with an explicit ``[env.agent.runtime] type = "subprocess"`` (the model's commands run on this machine).
- refused: a harness other than ``null``/``bash``, a runtime other than ``subprocess``, a recipe env (``[env] id``),
  ``run.attach``, ``select`` ``include``/``exclude``/``skip``, ``client.headers_from_env``, a ``train`` client,
  ``max_concurrent = None``, a ``reflection_client`` other than the task client.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from evalkit.core.errors import UserError
from evalkit.verifiers_compat.v1.config import (
    PROGRAMS,
    RUNTIME,
    SANDBOX,
    SEAT_KNOBS,
    check_runtime,
    env_config_data,
    refusal,
    seats,
)
from evalkit.verifiers_compat.v1.sandbox_config import hide_sandbox
from primekit_cli.dialect.args import DialectArgs, raw_config

NULL_HARNESS = "null"
SELECT_ALIASES = {"num_tasks": "limit", "num_examples": "limit", "batch_size": "limit", "shuffle": "shuffle"}
"""Top-level keys of verifiers' ``configs/`` files that the installed release spells ``select.<key>``."""


@dataclass
class Plan:
    """A v1 run config read by verifiers and translated: primekit's fields, verifiers' resolved config, notes."""

    fields: dict[str, Any]
    resolved: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    taskset: str = ""
    files: list[str] = field(default_factory=list)
    """The config files the run was launched with, in order."""
    module: str = ""
    """The taskset's module name (what verifiers imports)."""
    raw_keys: frozenset[str] = frozenset()
    """The top-level keys the files and flags gave (before verifiers filled in its defaults)."""
    raw_env: dict[str, Any] = field(default_factory=dict)
    """The ``[env]`` data the files and flags gave (which seat tables the user wrote)."""


def require_current() -> str:
    """The installed verifiers 0.4.x version; UserError naming the extra when it is absent or 0.3.1."""
    from evalkit.verifiers_compat import CURRENT_INSTALL, CURRENT_SERIES, require_verifiers

    require_verifiers()
    import verifiers

    version = str(getattr(verifiers, "__version__", ""))
    if not version.startswith(CURRENT_SERIES + "."):
        raise UserError(f"verifiers {CURRENT_SERIES}'s config dialect (@ config.toml, --a.b dotted overrides) is read "
                        f"with verifiers {CURRENT_SERIES}'s own config classes, and verifiers {version} is installed; "
                        f"{CURRENT_INSTALL} (in a venv of its own), or use primekit's [[eval]] TOML and flags")
    return version


def eval_plan(target: str | None, dialect: DialectArgs, env_dir: str = "environments") -> Plan:
    """An eval run from a v1 config file and/or a taskset id with dotted overrides."""
    from verifiers.v1.configs.cli.eval import EvalConfig

    config, plan = _validated(EvalConfig, target, dialect, env_dir)
    fields = _run_fields(config, plan)
    fields.update(rollouts_per_example=config.num_rollouts, env_id=plan.taskset)
    fields.update(_select_fields(config.select))
    if "run" in plan.raw_keys:
        plan.notes.append("run.name/run.dir: no effect: primekit names its run dirs ENV--MODEL/RUN_ID under "
                          "output_dir/evals/")
    plan.fields = fields
    return plan


def gepa_plan(target: str | None, dialect: DialectArgs, env_dir: str = "environments") -> Plan:
    """A GEPA run from a v1 config file and/or a taskset id with dotted overrides (``vf-gepa``'s keys)."""
    from verifiers.v1.gepa import GEPAConfig

    config, plan = _validated(GEPAConfig, target, dialect, env_dir)
    fields = _run_fields(config, plan)
    env_args = fields.pop("env_args")
    fields["envs"] = [{"id": plan.taskset, "args": env_args, "extra_env_kwargs": {}}]
    if fields.pop("output_dir", None) is not None:
        plan.notes.append("output_dir: no effect: primekit's GEPA writes under outputs/gepa/ (or -o RUN_DIR)")
    if config.select.model_dump(exclude_defaults=True):
        raise UserError("select: primekit's GEPA draws num_train/num_val tasks from the taskset's train and eval "
                        "splits; drop [select] (or its --select.* flags)")
    if config.initial_prompt is not None:
        fields["initial_prompt"] = config.initial_prompt
    _check_reflection_client(config)
    fields.update(max_calls=config.max_total_rollouts, minibatch_size=config.reflection_minibatch_size,
                  num_train=config.num_train, num_val=config.num_val, seed=config.seed)
    if config.reflection_columns:
        fields["state_columns"] = list(config.reflection_columns)
    if config.reflection_model:
        fields["reflection_model"] = config.reflection_model
    plan.fields = fields
    return plan


def _validated(config_cls: type, target: str | None, dialect: DialectArgs, env_dir: str) -> tuple[Any, Plan]:
    """verifiers' config object for the command line, and a Plan holding its resolved dump and the notes."""
    from pydantic import ValidationError

    from evalkit.core.tomlio import describe_validation_error

    require_current()
    files = list(dialect.files)
    taskset = None
    if target is not None:
        if target.endswith((".toml", ".json")):
            files.insert(0, target)
        else:
            taskset = target
    raw = raw_config(files, dialect.overrides, taskset)
    notes = _map_dialect(raw, config_cls)
    taskset_id = _taskset_id(raw)
    _refuse_programs(raw)
    module = _make_importable(taskset_id, env_dir)
    source = " + ".join(files) or "command line"
    given_keys, given_env = frozenset(raw), copy.deepcopy(raw.get("env") or {})  # validation rewrites raw in place
    hide_sandbox(raw.get("env"))
    try:
        config = config_cls.model_validate(raw)
    except ValidationError as exc:
        raise UserError(describe_validation_error(exc, source)) from exc
    except (ImportError, AttributeError, TypeError, ValueError) as exc:
        raise UserError(f"{source}: verifiers could not resolve the config: {exc}") from exc
    plan = Plan(fields={}, resolved=config.model_dump(mode="json"), notes=notes, taskset=taskset_id, files=files,
                module=module, raw_keys=given_keys, raw_env=given_env)
    return config, plan


def _taskset_id(raw: dict[str, Any]) -> str:
    env = raw.get("env")
    taskset = env.get("taskset") if isinstance(env, dict) else None
    found = taskset.get("id") if isinstance(taskset, dict) else None
    if not isinstance(found, str) or not found:
        raise UserError("no taskset: give one (prime eval run TASKSET ...), set [env.taskset] id in the config "
                        "file, or pass --env.taskset.id ID")
    return found


def _refuse_programs(raw: dict[str, Any]) -> None:
    """Refuse a seat's harness program before verifiers imports it (a program primekit would not run anyway)."""
    env = raw.get("env")
    for name, seat in (env.items() if isinstance(env, dict) else ()):
        harness = seat.get("harness") if isinstance(seat, dict) else None
        if isinstance(harness, dict) and harness.get("id", NULL_HARNESS) not in PROGRAMS:
            _refuse_harness(name, harness["id"])


def _refuse_harness(seat: str, harness_id: Any) -> None:
    raise UserError(f"env.{seat}.harness.id = '{harness_id}': {refusal(harness_id)}")


def _map_dialect(raw: dict[str, Any], config_cls: type) -> list[str]:
    """Rewrite, in place, the keys of verifiers' ``configs/`` files that the installed classes spell otherwise
    or that primekit has no use for; the notes say what happened."""
    notes: list[str] = []
    own = set(config_cls.model_fields)
    for old, new in SELECT_ALIASES.items():
        if old in raw and old not in own and "select" in own:
            raw.setdefault("select", {})
            if not isinstance(raw["select"], dict) or new in raw["select"]:
                raise UserError(f"{old} and select.{new} are the same setting; set it once")
            raw["select"][new] = raw.pop(old)
            notes.append(f"{old} -> select.{new} (the installed verifiers spells it select.{new})")
    if "serve" in raw and "serve" not in own:
        raw.pop("serve")
        notes.append("[serve]: no env-server pool here; primekit runs the environment in its own process")
    for key, why in (("push", "runs stay local (nothing is uploaded)"), ("rich", "primekit prints its own progress")):
        if key in raw and raw[key] not in (False, "false", None):
            notes.append(f"{key}: no effect: {why}")
        raw.pop(key, None)
    return notes


def _make_importable(taskset_id: str, env_dir: str) -> str:
    """Import the taskset's module the way primekit finds environments, so verifiers' import by module name finds
    it too; UserError when it is not a v1 taskset."""
    import importlib.util

    from evalkit.loading.resolve import import_env_module, module_name_for, resolve
    from evalkit.verifiers_compat.v1.loader import taskset_class_of

    module = module_name_for(taskset_id)
    try:
        source = resolve(taskset_id, env_dir)
    except UserError:
        if importlib.util.find_spec(f"verifiers.v1.tasksets.{module}") is not None:
            raise UserError(f"taskset '{taskset_id}' is verifiers' built-in adapter verifiers.v1.tasksets.{module}, "
                            "which primekit does not run (it needs that framework's own servers and data)") from None
        raise
    if source.origin == "builtin" or taskset_class_of(import_env_module(source)) is None:
        raise UserError(f"'{taskset_id}' is not a verifiers v1 taskset, and verifiers' run-config dialect describes "
                        f"one; run it with primekit's flags (prime eval run {taskset_id} -n 5 -r 3 ...)")
    return source.module_name


def _run_fields(config: Any, plan: Plan) -> dict[str, Any]:
    """Fields eval and GEPA share: model and client, sampling, concurrency, output dir, the env args."""
    fields: dict[str, Any] = {}
    set_keys = config.model_fields_set
    if config.run.attach:
        raise UserError("run.attach streams into a run on the Prime Intellect platform; primekit runs locally, drop it")
    if "model" in set_keys:
        fields["model"] = config.model
    else:
        plan.notes.append(f"model: not set here; -m, else primekit's default model (verifiers' default is "
                          f"{config.model})")
    if "model" in set_keys or "client" in set_keys:
        fields.update(_client_fields(config.client, "client"))
    sampling = _sampling(config.sampling)
    if sampling:
        fields["sampling"] = sampling
    if config.max_concurrent is None:
        raise UserError("max_concurrent = None (no limit) is not supported; give a number of rollouts in flight")
    fields["max_concurrent"] = config.max_concurrent
    if "output_dir" in set_keys:
        fields["output_dir"] = str(config.output_dir)
    env_args, rollout_timeout = _env_args(config.env, plan.raw_env, plan.notes)
    env_config_data(plan.taskset, plan.module, env_args)  # primekit's own checks of these args, before any run
    fields["env_args"] = env_args
    if rollout_timeout is not None:
        fields["rollout_timeout"] = rollout_timeout
    return fields


def _client_fields(client: Any, where: str) -> dict[str, Any]:
    """``base_url``, ``api_key_var`` and ``headers`` of an eval client (verifiers' default: Prime Inference)."""
    if getattr(client, "type", "eval") != "eval":
        raise UserError(f"{where}.type = '{client.type}': primekit speaks OpenAI chat completions; use an eval client")
    if client.headers_from_env:
        raise UserError(f"{where}.headers_from_env is not supported; put the header in an --env-file and pass it "
                        "with --header 'Name: Value'")
    fields: dict[str, Any] = {"base_url": client.base_url, "api_key_var": client.api_key_var}
    if client.headers:
        fields["headers"] = dict(client.headers)
    return fields


def _sampling(sampling: Any) -> dict[str, Any]:
    """The set sampling knobs; an extra (provider) key given as a dotted flag arrives as text and is read as JSON."""
    found = sampling.model_dump(exclude_none=True)
    for key, value in list(found.items()):
        if isinstance(value, str) and key not in type(sampling).model_fields:
            try:
                found[key] = json.loads(value)
            except json.JSONDecodeError:
                pass
    return found


def _select_fields(select: Any) -> dict[str, Any]:
    """``select`` as primekit's ``num_examples`` / ``shuffle`` / ``seed`` (verifiers' default: every task)."""
    extra = [name for name in ("include", "exclude", "skip") if name in select.model_fields_set
             and getattr(select, name) != type(select).model_fields[name].get_default(call_default_factory=True)]
    if extra:
        raise UserError(f"select.{extra[0]}: primekit takes the first num_tasks tasks (after shuffle); "
                        "drop select.include/exclude/skip")
    return {"num_examples": select.limit if select.limit is not None else -1, "shuffle": select.shuffle,
            "seed": select.seed}


def _check_reflection_client(config: Any) -> None:
    if config.reflection_client is None:
        return
    theirs = _client_fields(config.reflection_client, "reflection_client")
    ours = _client_fields(config.client, "client")
    if theirs != ours:
        raise UserError("reflection_client: primekit's GEPA sends the reflection model to the task model's endpoint "
                        "(or an endpoint id from configs/endpoints.toml); name the teacher's endpoint as "
                        "reflection_model in endpoints.toml, or drop reflection_client")


def _env_args(env: Any, given: dict[str, Any], notes: list[str]) -> tuple[dict[str, Any], float | None]:
    """primekit's env args (``{"taskset": ..., "harness": ..., <env knobs>}``) for a validated ``[env]``."""
    from verifiers.v1.configs.env import EnvConfig

    if env.id:
        raise UserError(f"[env] id = '{env.id}': primekit runs the taskset's own env (or single-agent env), not "
                        "verifiers' recipe envs; drop [env] id (--env.id)")
    shared = env.model_dump(exclude_unset=True, include=set(EnvConfig.model_fields) - {"id", "taskset"})
    timeout = shared.pop("timeout", {})
    if shared or set(timeout) - {"episode"}:
        keys = sorted([*shared, *(f"timeout.{k}" for k in timeout if k != "episode")])
        raise UserError(f"[env] {', '.join(keys)}: primekit runs one agent at a time per episode in-process; "
                        "only [env.timeout] episode (a rollout's timeout) is read")
    config_seats = seats(type(env))
    own = set(type(env).model_fields) - set(EnvConfig.model_fields) - set(config_seats)
    args: dict[str, Any] = env.model_dump(mode="json", exclude_unset=True, include=own)
    taskset = env.taskset.model_dump(mode="json", exclude_unset=True)
    taskset.pop("id", None)
    args["taskset"] = taskset
    harness = _harness_knobs({name: getattr(env, name) for name in config_seats}, given, env.taskset.id, notes)
    runtime = harness.pop("runtime", None)
    if harness:
        args["harness"] = harness
    if runtime is not None:
        args["runtime"] = runtime
    return args, timeout.get("episode")


def _harness_knobs(agents: dict[str, Any], given: dict[str, Any], taskset_id: str, notes: list[str]) -> dict[str, Any]:
    """One ``harness`` knob set for every seat (primekit applies it to all), from the seat tables the user gave
    (``given``: the raw ``[env]`` data); UserError when seats would differ, or name a harness or runtime primekit
    does not run."""
    found: dict[str, dict[str, Any]] = {}
    for name, agent in agents.items():
        table = given.get(name)
        knobs = _seat_knobs(name, agent, table if isinstance(table, dict) else {}, taskset_id, notes)
        if knobs:
            found[name] = knobs
    distinct = {json.dumps(knobs, sort_keys=True) for knobs in found.values()}
    if len(distinct) > 1 or (found and len(found) < len(agents)):
        raise UserError(f"seats {', '.join(agents)} would get different limits or harness settings; primekit "
                        "applies one [env.harness] set to every seat, so give every seat the same ones")
    return next(iter(found.values()), {})


def _seat_knobs(name: str, agent: Any, given: dict[str, Any], taskset_id: str, notes: list[str]) -> dict[str, Any]:
    """The limits and chat-program settings a seat's own table gives (the ``harness`` env-arg part), with the
    notes and refusals for its harness and runtime."""
    from verifiers.v1.utils.loaders import default_harness_id

    knobs = agent.model_dump(mode="json", include=set(SEAT_KNOBS) & set(given))
    for pin in ("model", "client", "sampling"):
        if pin in given and getattr(agent, pin) is not None:
            notes.append(f"env.{name}.{pin}: no effect: the run's model plays every seat in primekit")
    if agent.harness is None:
        notes.append(f"env.{name}.harness: unset; verifiers would run '{default_harness_id(taskset_id)}', primekit "
                     f"runs verifiers' '{NULL_HARNESS}' chat program")
    elif agent.harness.id not in PROGRAMS:
        _refuse_harness(name, agent.harness.id)
    elif isinstance(given.get("harness"), dict):
        knobs.update(agent.harness.model_dump(mode="json", include=set(given["harness"])), id=agent.harness.id)
    runtime = agent.runtime
    if "runtime" not in agent.model_fields_set:
        notes.append(f"env.{name}.runtime: unset; verifiers would use the hosted '{runtime.type}' sandbox, primekit "
                     f"runs the harness program as a local {RUNTIME}")
    else:
        table = given.get("runtime")
        if isinstance(table, dict) and table.get("type") in (SANDBOX, RUNTIME):
            knobs["runtime"] = dict(table)  # checked with its limit knobs by env_config_data
        else:
            check_runtime(f"env.{name}.runtime", runtime.type)
            knobs["runtime"] = {"type": runtime.type}  # the user's explicit choice (the bash harness asks for it)
    return knobs
