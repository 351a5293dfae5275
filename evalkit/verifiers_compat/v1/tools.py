"""The MCP tools a verifiers v1 taskset offers its model, listed without a model or a rollout.

In v1 a task's tools are MCP servers (``Taskset.toolsets`` shared by the run, ``Task.toolsets`` per rollout);
verifiers' chat program lists them when a rollout starts and sends them to the model as ``<server>_<tool>``
(a server whose ``TOOL_PREFIX`` is None: the bare tool name), each with the MCP tool's description. GEPA's
``tools`` component and ``prime eval run --tools-file`` need those names and descriptions up front: the seed
candidate's texts are the current descriptions, and a file naming a tool the taskset lacks is refused.

:func:`list_tool_schemas` registers each toolset on an MCP server object in this process, exactly as the
server verifiers launches does (``toolset.register(server)``), and asks it for its tools, so nothing is
started and no network is needed. What that cannot see is refused in one line rather than guessed: a tool
server that is already running elsewhere (``url`` set), or one whose class registers its tools itself
(``register`` overridden: its tools may depend on what its ``setup`` found).
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from evalkit.core.errors import UserError


def list_tool_schemas(vf_env: Any, env_id: str) -> list[dict[str, Any]]:
    """OpenAI tool schemas of every MCP tool ``vf_env``'s rollouts offer, named as verifiers' chat program names
    them; UserError when a tool server's tools cannot be listed offline."""
    taskset = vf_env.taskset
    toolsets = [*taskset.toolsets(taskset.config), *type(taskset).task_type().toolsets(taskset.config.task)]
    for toolset in toolsets:
        _check_listable(toolset, env_id)
    if not toolsets:
        return []
    with ThreadPoolExecutor(1) as pool:  # the caller may be inside an event loop; listing is async
        listed = pool.submit(asyncio.run, _list(toolsets)).result()
    names = [schema["function"]["name"] for schema in listed]
    clashes = sorted({name for name in names if names.count(name) > 1})
    if clashes:
        raise UserError(f"v1 taskset '{env_id}': two tool servers offer {', '.join(clashes)}; "
                        "give one a distinct TOOL_PREFIX")
    return listed


def _check_listable(toolset: Any, env_id: str) -> None:
    from verifiers.v1.mcp.toolset import Toolset

    name = toolset.server_name or type(toolset).__name__
    url = getattr(toolset.config, "url", None)
    if url:
        raise UserError(f"v1 taskset '{env_id}': tool server '{name}' runs at {url}, so its tools cannot be "
                        "listed offline; use --components system_prompt (or a --tools-file naming known tools)")
    if not isinstance(toolset, Toolset) or type(toolset).register is not Toolset.register:
        raise UserError(f"v1 taskset '{env_id}': tool server '{name}' registers its tools itself, so they are "
                        "known only once it runs; use --components system_prompt")


async def _list(toolsets: list[Any]) -> list[dict[str, Any]]:
    schemas = []
    for toolset in toolsets:
        server = _mcp_server(toolset.server_name or type(toolset).__name__)
        toolset.register(server)
        for tool in await server.list_tools():
            prefix = toolset.server_name
            schemas.append({"type": "function", "function": {
                "name": f"{prefix}_{tool.name}" if prefix else tool.name,
                "description": tool.description or "",
                "parameters": _input_schema(tool),
            }})
    return schemas


def _mcp_server(name: str) -> Any:
    """The MCP server class verifiers registers toolsets on: ``MCPServer`` (mcp 2, verifiers 0.4) or
    ``FastMCP`` (mcp 1, verifiers 0.3.1). Building one configures the root logger (``logging.basicConfig``
    with a rich handler at INFO), which in this process would print every library's INFO lines; what the
    root logger had is put back."""
    try:
        from mcp.server.mcpserver import MCPServer as server_class
    except ImportError:
        from mcp.server.fastmcp import FastMCP as server_class
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        return server_class(name)
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def _input_schema(tool: Any) -> dict[str, Any]:
    schema = getattr(tool, "input_schema", None)
    return dict(schema if schema is not None else getattr(tool, "inputSchema", None) or {})
