"""What every export target shares: the result type, the model and environment names a target can load,
and the rule for knobs a target cannot express.

A target module describes each primekit key in three tables (checked complete by the tests):

* ``MAPPING``: primekit key -> the target's key that carries it (also the README's mapping table);
* ``LOCAL_ONLY``: keys that describe this machine's run (devices, the local rollout engine, the
  baseline checks primekit itself runs first) and so have nothing to carry;
* ``NO_MEANING``: key -> why the target has no equivalent. Such a key at its primekit default is
  noted in the output; changed by the user, the export refuses, naming each key;
* ``NOTED``: key -> why it is not carried, for keys that do not change what is trained (evaluation
  sizes, a W&B entity): noted when set, never refused.

Every refusal is one :class:`~evalkit.core.errors.UserError` line listing all problems found, so a user
fixes them in one go.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from evalkit.core.errors import UserError
from rl_backend.config import EnvConfig, RLConfig

EnvKind = Literal["v1", "legacy", "native", "builtin"]
"""A verifiers v1 taskset package, a legacy verifiers environment (``load_environment`` returning a
``verifiers`` environment), a primekit-native environment (``load_environment`` returning an
``evalkit.envs`` environment) or a primekit built-in."""

KIND_TEXT = {
    "v1": "a verifiers v1 taskset",
    "legacy": "a legacy verifiers environment (load_environment)",
    "native": "a primekit environment (evalkit.envs), which only primekit runs",
    "builtin": "primekit's built-in environment",
}


@dataclass
class Export:
    """One target's translation of a config.

    ``text`` is the file to write (a TOML config or a shell script); ``command`` the command that
    runs it (printed after writing); ``notes`` what was not carried and why (printed to stderr);
    ``extra_files`` files that must sit beside ``text`` (name -> content, e.g. a system prompt).
    """

    target: str
    text: str
    suffix: str
    command: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    extra_files: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class EnvEntry:
    """One ``[[env]]`` as a target sees it: the config, what kind of environment it resolves to,
    and the module name verifiers imports it by."""

    spec: EnvConfig
    kind: EnvKind
    module: str
    local_path: Path | None

    @property
    def verifiers_id(self) -> str:
        """The id the user wrote, or for a folder path the module's name (verifiers imports by name)."""
        if self.spec.id.startswith((".", "/", "~")):
            return self.module.replace("_", "-")
        return self.spec.id

    @property
    def bare_id(self) -> str:
        """``owner/name@version`` -> ``name`` (what ``vf.load_environment`` takes)."""
        return self.verifiers_id.rsplit("/", 1)[-1].split("@", 1)[0]


def classify_envs(config: RLConfig, specs: list[EnvConfig] | None = None) -> list[EnvEntry]:
    """Resolve each ``[[env]]`` the way `prime rl run` does and say what kind it is.

    A built-in is classified without importing anything; other environments are imported (not
    loaded: ``load_environment`` is not called, so no dataset is read) to tell a v1 taskset from a
    ``load_environment`` module. Whether such a module builds a verifiers or a primekit environment is
    read from what it imported (a module that imports ``verifiers`` but not ``verifiers.v1``).
    """
    from evalkit.loading.resolve import import_env_module, resolve
    from evalkit.verifiers_compat.v1.loader import taskset_class_of

    entries = []
    for spec in config.env if specs is None else specs:
        source = resolve(spec.id)
        if source.origin == "builtin":
            entries.append(EnvEntry(spec, "builtin", source.module_name, None))
            continue
        module = import_env_module(source)
        if taskset_class_of(module) is not None:
            kind: EnvKind = "v1"
        else:
            kind = "legacy" if _imports_legacy_verifiers(module) else "native"
        entries.append(EnvEntry(spec, kind, source.module_name, source.path))
    return entries


def _imports_legacy_verifiers(module: Any) -> bool:
    for value in vars(module).values():
        name = (
            getattr(value, "__name__", "")
            if isinstance(value, type(module))
            else getattr(value, "__module__", "") or ""
        )
        if name == "verifiers" or (name.startswith("verifiers.") and not name.startswith("verifiers.v1")):
            return True
    return False


def env_problems(entries: list[EnvEntry], target: str, accepted: tuple[EnvKind, ...]) -> list[str]:
    """One problem per environment ``target`` cannot load, with what to do."""
    wanted = " or ".join(KIND_TEXT[kind].split(" (")[0] for kind in accepted)
    example = " (environments/digit_sums is one)" if "v1" in accepted else ""
    builtins = [f"'{entry.spec.id}'" for entry in entries if entry.kind == "builtin"]
    problems = []
    if builtins:
        problems.append(
            f"[[env]] {', '.join(builtins)}: primekit's built-in environment{'s' if len(builtins) > 1 else ''}, which "
            f"{target} cannot load (a same-named environment there, such as verifiers' reverse-text, is a different "
            f"environment); train on {wanted} package instead{example}"
        )
    for entry in entries:
        if entry.kind not in accepted and entry.kind != "builtin":
            problems.append(f"[[env]] '{entry.spec.id}' is {KIND_TEXT[entry.kind]}; {target} loads {wanted} only")
    return problems


def hub_model(config: RLConfig, target: str) -> tuple[str | None, list[str]]:
    """The model name a remote trainer can load (a Hub id or a folder), or a problem.

    ``local/...`` names primekit's embedded models, which exist only inside primekit; ``hf/org/name``
    is primekit's spelling of the Hub id ``org/name``.
    """
    from evalkit.model.registry import ALIASES, HUB_PREFIX

    model = config.model
    if model.startswith("local/"):
        hub_ids = [hub for hub, alias in ALIASES.items() if alias == model and "/" in hub]
        same = f' (the same weights: --model {hub_ids[0]})' if hub_ids else ""
        return None, [f"model '{model}' is primekit's embedded-model alias, which {target} cannot load; "
                      f"set model to a Hugging Face id{same}"]
    return model.removeprefix(HUB_PREFIX), []


@functools.lru_cache(maxsize=1)
def _defaults() -> RLConfig:
    return RLConfig.model_validate({"env": [{"id": "defaults"}]})


def value_at(config: Any, path: str) -> Any:
    """``value_at(config, "trainer.lora.rank")``; ``None`` when a table on the way is off (``lora = false``)."""
    node = config
    for part in path.split("."):
        if node is None:
            return None
        if isinstance(node, list):  # the [[env]] tables: one value per table
            return [getattr(item, part) for item in node]
        node = getattr(node, part) if not isinstance(node, dict) else node.get(part)
    return node


def changed(config: RLConfig, path: str) -> bool:
    """Whether the user set ``path`` to something other than primekit's default."""
    if path.startswith("env."):
        field_name = path.split(".", 1)[1]
        default = getattr(_defaults().env[0], field_name)
        return any(getattr(spec, field_name) != default for spec in config.env)
    return value_at(config, path) != value_at(_defaults(), path)


def knob_problems(config: RLConfig, no_meaning: dict[str, str], target: str, same_at_default: tuple[str, ...] = (),
                  noted: dict[str, str] | None = None) -> tuple[list[str], list[str]]:
    """(problems, notes): keys without meaning in ``target`` that the user changed are problems; the
    others are noted as not carried, except ``same_at_default`` (their default is what the target
    does). ``noted`` keys are noted when changed and never refused."""
    problems, notes = [], []
    for path, why in no_meaning.items():
        if changed(config, path):
            problems.append(f"{path} = {_shown(value_at(config, path))} has no {target} equivalent ({why})")
        elif path not in same_at_default:
            notes.append(f"{path}: not carried ({why})")
    for path, why in (noted or {}).items():
        if changed(config, path):
            notes.append(f"{path} = {_shown(value_at(config, path))}: not carried ({why})")
    return problems, notes


def _shown(value: Any) -> str:
    return repr(value) if not isinstance(value, BaseModel) else "set"


NEWER_NOTED: dict[str, str] = {
    "env_file": (
        "set these variables where the target runs (`prime rl run --backend prime-rl` passes this process's on)"
    ),
    "trajectory_strategy": "the target builds its own training samples from multi-turn rollouts",
    "retokenize": "the target builds its own training samples from multi-turn rollouts",
}
"""Keys of the RL config that change nothing a target trains: noted when set, for every target."""
HALT_ON: dict[str, str] = {
    "health.halt_on": "--halt-on: primekit's health checks watch its own trainer's steps; the target trains and logs "
                      "its own (train with --backend primekit to halt on alarms)",
}
"""A key no target can carry, refused when set (its default, no alarms, is what every target does)."""
GRPO_ONLY: dict[str, str] = {
    "algo": "its trainer assigns group-relative advantages only; prime-rl carries [algo] as [orchestrator.algo]",
    "env.algo": "one algorithm per run there; prime-rl carries a per-environment algo",
}
"""The training algorithm, for targets that run GRPO-style credit only: refused when not the default."""
DPPO_ONLY: dict[str, str] = {f"trainer.loss.{key}": "a knob of prime-rl's default loss (trainer.loss.type = 'dppo')"
                             for key in ("dppo_mask_low", "dppo_mask_high", "adv_tau", "kl_tau")}
"""prime-rl's DPPO+KL knobs, for targets without that loss (set only with it, which they refuse)."""
NEWER_SAME_AT_DEFAULT = (*DPPO_ONLY, "algo", "env.algo",
                         "health.halt_on", "sampling.top_k", "sampling.min_p", "sampling.repetition_penalty",
                         "sampling.enable_thinking",
                         "sampling.reasoning_effort", "trainer.kl_coef", "trainer.mask_truncated_completions",
                         "trainer.zero_truncated_completions", "eval.env", "filter.oversampling_factor")
"""Keys whose primekit default (off) is what every target does (no note when untouched)."""


def checked(config: RLConfig, tables: Any, accepted: tuple[EnvKind, ...],
            problems: list[str]) -> tuple[str, list[EnvEntry], list[str]]:
    """The model name, the classified environments and the notes for a target whose ``tables`` (its
    module: ``TARGET``, ``NO_MEANING``, ``SAME_AT_DEFAULT``, ``NOTED``) describe it; raises one
    UserError with ``problems`` (the target's own) and every model, environment and knob problem."""
    model, found = hub_model(config, tables.TARGET)
    entries = classify_envs(config)
    found += env_problems(entries, tables.TARGET, accepted) + problems
    knobs, notes = knob_problems(config, tables.NO_MEANING, tables.TARGET, tables.SAME_AT_DEFAULT, tables.NOTED)
    refuse(found + knobs, tables.TARGET)
    assert model is not None
    return model, entries, notes


def one_env_problems(config: RLConfig, recipe: str) -> list[str]:
    """Recipes that train one environment per run."""
    if len(config.env) == 1:
        return []
    return [f"{len(config.env)} [[env]] tables: {recipe} trains one environment (export one config per environment, "
            "or combine them in one verifiers EnvGroup package)"]


def refuse(problems: list[str], target: str) -> None:
    """Raise one line naming every problem, when there are any."""
    if problems:
        raise UserError(f"cannot export to {target}: " + "; ".join(problems))


def leaf_paths(model: type[BaseModel] = RLConfig, prefix: str = "") -> list[str]:
    """Every key of the config as a dotted path (``trainer.lora.rank``; ``env.id`` for the ``[[env]]`` tables)."""
    import typing

    paths = []
    for name, info in model.model_fields.items():
        inner = [arg for arg in (typing.get_args(info.annotation) or (info.annotation,)) if arg is not type(None)]
        for arg in list(inner):
            inner += list(typing.get_args(arg))
        nested = [arg for arg in inner if isinstance(arg, type) and issubclass(arg, BaseModel)]
        if nested:
            paths += leaf_paths(nested[0], f"{prefix}{name}.")
        else:
            paths.append(f"{prefix}{name}")
    return paths


def covered(path: str, keys: Any) -> bool:
    """Whether ``path`` or a table above it is one of ``keys``."""
    parts = path.split(".")
    return any(".".join(parts[:n]) in keys for n in range(1, len(parts) + 1))


class Expanded(str):
    """A word the exporter itself writes in which ``$DATA_DIR`` is meant for the shell to expand (SkyRL's
    dataset folder). Never built from a config value: every other word is data and quoted as such."""


_DOUBLE_QUOTE_SPECIAL = frozenset('$`"\\!\n')


def shell_word(word: str) -> str:
    """``word`` quoted for bash with the shell's own rules (:func:`shlex.quote`): a value is data, never code.

    Only an :class:`Expanded` word keeps ``$DATA_DIR`` live: double-quoted when the rest of it has nothing
    bash reads inside double quotes, else each literal piece single-quoted around ``"$DATA_DIR"``.
    """
    import shlex

    if not isinstance(word, Expanded) or "$DATA_DIR" not in word:
        return shlex.quote(str(word))
    pieces = str(word).split("$DATA_DIR")
    if not any(char in _DOUBLE_QUOTE_SPECIAL for piece in pieces for char in piece):
        return f'"{word}"'
    return '"$DATA_DIR"'.join(shlex.quote(piece) if piece else "" for piece in pieces)


def comment_word(word: str) -> str:
    """``word`` quoted for a ``#`` comment line: as :func:`shell_word`, and on one line (a newline in a
    comment would end it, and the rest would run), in bash's ``$'...'`` form when it holds a control character."""
    if not any(ord(char) < 32 or ord(char) == 127 for char in word):
        return shell_word(word)
    escaped = "".join(_ansi_c(char) for char in word)
    return f"$'{escaped}'"


def _ansi_c(char: str) -> str:
    if char in "\\'":
        return "\\" + char
    if ord(char) < 32 or ord(char) == 127:
        return f"\\x{ord(char):02x}"
    return char


class Operator(str):
    """A shell operator the exporter itself puts between two commands (SkyRL's dataset step ``&&`` its trainer):
    left bare on the printed line, where a word from a config, whatever it spells, is always quoted."""


AND_THEN = Operator("&&")


def command_line(words: list[str]) -> str:
    """``words`` as one line a user can paste into bash: each word quoted as data, each :class:`Operator` bare."""
    return " ".join(str(word) if isinstance(word, Operator) else shell_word(word) for word in words)


def shell_command(head: list[str], args: list[str]) -> str:
    """``head`` on one line and each argument on its own continuation line, quoted for bash."""
    return " \\\n  ".join([" ".join(shell_word(word) for word in head), *(shell_word(arg) for arg in args)])
