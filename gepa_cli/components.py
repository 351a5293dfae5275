"""What a GEPA candidate is made of: the system prompt and, for tool environments, the tools' descriptions.

``components`` (``--components system_prompt,tools``) picks them; ``--list-components`` shows what an
environment offers, with the seed text of each. A candidate is gepa's ``{name: text}`` dict:

* ``system_prompt``: the shared system prompt (always optimized: the run's output schema, verifiers',
  is built around it), written to ``system_prompt.txt``;
* ``system_prompt:<env>`` (a multi-environment run): environment ``<env>``'s own system prompt, which
  replaces ``system_prompt`` for its rollouts; the teacher sees only that environment's examples for it;
* ``tools``: a JSON object ``{"tool name": "description"}`` over the tools of every environment of the
  run that is a native :class:`~evalkit.envs.tool_env.ToolEnv`, a legacy verifiers ``vf.ToolEnv``
  (:class:`~evalkit.verifiers_compat.legacy.env.VerifiersEnvironment`) or a verifiers v1 taskset with MCP tool
  servers (:class:`~evalkit.verifiers_compat.v1.env.TasksetEnvironment`: its descriptions are put into the model
  requests at the bridge), written to ``tools.json``, which ``prime eval run --tools-file`` applies. A proposal
  for it must stay such an object naming the same tools (:func:`check_text`); the teacher is asked again
  otherwise. The tools are listed only when asked for (``--list-components``, or ``tools`` chosen): listing a
  v1 taskset's tools can fail, and a system-prompt-only run should not pay for it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from evalkit.core.errors import UserError
from evalkit.envs.tool_descriptions import descriptions_of
from gepa_cli.adapter import COMPONENT, TOOLS

FILES = {TOOLS: "tools.json"}
"""The file each component other than the system prompt is written to, beside ``system_prompt.txt``."""
KNOWN = (COMPONENT, TOOLS)


def seed_prompt(envs: list[Any]) -> str:
    """The first environment's own system prompt (several envs share one prompt; the first names it)."""
    for env in envs:
        if env.system_prompt:
            return env.system_prompt
    return ""


def tool_descriptions(envs: list[Any]) -> dict[str, str]:
    """Every native tool of the run's environments, by name (the first environment to name a tool describes it)."""
    found: dict[str, str] = {}
    for env in envs:
        for name, text in descriptions_of(env).items():
            found.setdefault(name, text)
    return found


ENV_PROMPT = f"{COMPONENT}:"
"""Prefix of a per-environment system prompt component, ``system_prompt:<env id>`` (a multi-environment run)."""


def env_prompt(env_id: str) -> str:
    """The component name of environment ``env_id``'s own system prompt."""
    return f"{ENV_PROMPT}{env_id}"


def available(envs: list[Any], ids: list[str] | None = None, tools: bool = True) -> dict[str, str]:
    """The components these environments offer, with their seed text. With several environments (and their
    ``ids``), each one's own system prompt too: ``system_prompt:<id>``, which replaces the shared
    ``system_prompt`` for that environment's rollouts (seeded with its own prompt, or the shared one).
    ``tools=False`` leaves the tools out without listing them."""
    found = {COMPONENT: seed_prompt(envs)}
    if ids and len(envs) > 1:
        found.update({env_prompt(env_id): env.system_prompt or found[COMPONENT] for env, env_id in zip(envs, ids)})
    if not tools:
        return found
    described = tool_descriptions(envs)
    if described:
        found[TOOLS] = json.dumps(described, indent=2, ensure_ascii=False)
    return found


def seed_candidate(envs: list[Any], names: list[str], ids: list[str] | None = None) -> dict[str, str]:
    """The seed candidate of the chosen components; UserError naming what the environments offer."""
    offered = available(envs, ids, tools=TOOLS in names)
    missing = [name for name in names if name not in offered]
    if missing:
        offered = available(envs, ids)
        raise UserError(f"--components: the environment has no {', '.join(missing)} component "
                        f"(it offers: {', '.join(offered)}; see --list-components)")
    return {name: offered[name] for name in names}


def check_text(name: str, seed: dict[str, str]) -> Callable[[str], str | None] | None:
    """For a component whose text has a shape, a check a proposal must pass (None: any text will do)."""
    if name != TOOLS:
        return None
    known = set(json.loads(seed[TOOLS]))

    def check(text: str) -> str | None:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            return f"not a JSON object ({exc.msg})"
        if not isinstance(data, dict) or set(data) != known:
            return f"must be a JSON object with exactly the keys {sorted(known)}"
        if any(not isinstance(v, str) or not v.strip() for v in data.values()):
            return "every description must be non-empty text"
        return None

    return check


def component_files(candidate: dict[str, str]) -> dict[str, str]:
    """File name -> text: one file per component other than the system prompt (``tools.json``), from ``candidate``."""
    return {file: json.dumps(json.loads(candidate[name]), indent=2, ensure_ascii=False) + "\n"
            for name, file in FILES.items() if name in candidate}


def listing(envs: list[Any], ids: list[str] | None = None) -> list[str]:
    """``--list-components``: one line per component and its seed text, indented."""
    lines = []
    for name, text in available(envs, ids).items():
        lines.append(f"{name}:")
        lines.extend(f"    {line}" for line in (text or "(empty)").splitlines())
    return lines
