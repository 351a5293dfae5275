"""Tool descriptions of a verifiers v1 taskset (MCP tool servers) as a GEPA component and a ``--tools-file``.

verifiers' chat program lists the taskset's MCP tools itself, so the descriptions are put into the model requests
at primekit's model bridge. Real parts: `prime` in a subprocess, verifiers' chat program and the taskset's MCP tool
server (tests/verifiers_envs/vf_v1_shared) as subprocesses, and tests/support/solver_server.py on 127.0.0.1
recording what the model was sent (for GEPA, a model that calls the tool only when its description says so).
Every test but GEPA's is marked ``verifiers`` (run under both generations: each has its own chat program and MCP
server class). GEPA's asserts the job's proposal reaching ``tools.json``, primekit's alone (the bridge's rewriting
under each program is the tools-file test's), so it runs once, under 0.3.1.
Listings and refusals run `prime` in this process (:func:`in_project`): a child would import verifiers again
(~8 s of CPU each) to print a line.
"""

from __future__ import annotations

import json
import os
from functools import partial

import pytest
from aiohttp import ClientSession
from support.scripted_client import ScriptedClient
from support.solver_server import SolverServer

pytest.importorskip("verifiers", reason="needs a verifiers extra (make test installs both generations)")

from support.cli import assert_user_error, prime_in_project, prime_process

from evalkit.loading.resolve import load_environment  # noqa: E402
from evalkit.verifiers_compat.v1.bridge import ModelBridgeServer, bridge_key_var  # noqa: E402

SEED = "Add two integers."


@pytest.fixture
def in_project(verifiers_project):
    """``prime ARGS`` in this process, from the project as ``prime_process`` runs it there."""
    return partial(prime_in_project, verifiers_project)


def described(requests: list[dict]) -> set[str]:
    """The descriptions of the tools offered in the model requests (the eval's preflight offers none)."""
    return {tool["function"]["description"] for request in requests for tool in request.get("tools") or []}


@pytest.mark.verifiers
def test_list_components_shows_the_mcp_tools_and_their_descriptions(in_project):
    done = in_project("gepa", "run", "vf-v1-shared", "-m", "m", "-b", "http://127.0.0.1:9/v1", "--list-components")
    assert done.exit_code == 0, done.output[-3000:]
    tools = done.stdout.split("tools:\n", 1)[1]
    assert json.loads(tools) == {"calc_add": SEED}  # named as the chat program names it: <server>_<tool>


@pytest.mark.verifiers
def test_a_tool_server_running_elsewhere_is_refused_in_one_line(in_project):
    done = in_project("gepa", "run", "vf-v1-shared", "-m", "m", "-b", "http://127.0.0.1:9/v1",
                      "-a", json.dumps({"tools": {"url": "http://127.0.0.1:9/mcp"}}), "--list-components")
    assert_user_error(done)
    assert done.stderr.strip().splitlines() == [
        "error: v1 taskset 'vf-v1-shared': tool server 'calc' runs at http://127.0.0.1:9/mcp, so its tools cannot be "
        "listed offline; use --components system_prompt (or a --tools-file naming known tools)"]


@pytest.mark.verifiers
@pytest.mark.slow  # ~20 s: an eval whose rollout is verifiers' chat program with the MCP tool server
def test_tools_file_descriptions_reach_the_model(verifiers_project, solver, in_project):
    """The set's description replaces the tool's own in what the model is sent (that a run without a set sends the
    tool's own is the bridge test below, and GEPA's, whose seed candidate is the tool's own)."""
    args = ["eval", "run", "vf-v1-shared", "-m", "solver", "-b", solver.base_url, "-n", "1", "-r", "1"]
    (verifiers_project / "tools.json").write_text(json.dumps({"calc_add": "Sums two integers. CALL ME."}))
    before = len(solver.requests())
    done = prime_process(*args, "--tools-file", "tools.json", project=verifiers_project)
    assert done.returncode == 0, done.stderr[-3000:]
    sent = solver.requests()[before:]
    assert described(sent) == {"Sums two integers. CALL ME."} and len([r for r in sent if r.get("tools")]) == 2
    rows = [json.loads(line) for found in (verifiers_project / "environments").rglob("results.jsonl")
            for line in found.read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["reward"] == 1.0  # the tool still runs

    (verifiers_project / "bad.json").write_text(json.dumps({"add": "x"}))
    done = in_project(*args, "--tools-file", "bad.json")
    assert_user_error(done)
    assert done.stderr.strip().splitlines() == [
        "error: --tools-file: no tool named 'add' in this environment (its tools: calc_add)"]


@pytest.mark.verifiers
@pytest.mark.slow  # ~15 s: two evals whose tasks each start their own tool server
def test_a_tool_server_per_rollout_is_listed_and_described_too(verifiers_project, solver, in_project):
    """``Task.toolsets`` (one server per rollout) advertised without a prefix: the tool is ``add``."""
    done = in_project("gepa", "run", "vf-v1-task-tools", "-m", "m", "-b", "http://127.0.0.1:9/v1", "--list-components")
    assert done.exit_code == 0, done.output[-3000:]
    assert json.loads(done.stdout.split("tools:\n", 1)[1]) == {"add": SEED}
    (verifiers_project / "tools.json").write_text(json.dumps({"add": "Adds. CALL ME."}))
    before = len(solver.requests())
    done = prime_process("eval", "run", "vf-v1-task-tools", "-m", "solver", "-b", solver.base_url, "-n", "2",
                         "-r", "1", "--tools-file", "tools.json", project=verifiers_project)
    assert done.returncode == 0, done.stderr[-3000:]
    sent = [request for request in solver.requests()[before:] if request.get("tools")]
    assert len(sent) == 4 and {
        (t["function"]["name"], t["function"]["description"]) for r in sent for t in r["tools"]
    } == {("add", "Adds. CALL ME.")}


@pytest.mark.verifiers
async def test_the_bridge_rewrites_only_the_tools_a_set_names():
    client = ScriptedClient(["ok"])
    tools = [{"type": "function", "function": {"name": n, "description": f"{n} as is", "parameters": {}}}
             for n in ("a", "b")]
    async with ModelBridgeServer(client) as bridge:
        headers = {"Authorization": f"Bearer {os.environ[bridge_key_var()]}"}
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": tools}
        async with ClientSession(headers=headers) as http:
            for base in (bridge.url_for({"a": "new a", "zzz": "unknown"}), bridge.base_url, bridge.url_for({})):
                async with http.post(f"{base}/chat/completions", json=body) as response:
                    assert response.status == 200
            async with http.post(
                bridge.base_url.replace("/v1", "/described/nokey/v1/chat/completions"), json=body
            ) as response:
                assert response.status == 404
    assert [[t["function"]["description"] for t in r["tools"]] for r in client.requests] == [
        ["new a", "b as is"], ["a as is", "b as is"], ["a as is", "b as is"]]
    assert tools[0]["function"]["description"] == "a as is"  # the request's own list is not touched


@pytest.mark.slow  # ~30 s: a dozen rollouts, each verifiers' chat program with the MCP tool server
def test_prime_gepa_run_writes_the_proposed_descriptions_to_tools_json(verifiers_project):
    """The command as a user runs it: the task model (tests/support/solver_server.py) calls the tool only when its
    description says "Double-check", which the same server, as the teacher (-M), adds to each description."""
    server = SolverServer("--call-only-if", "Double-check")
    try:
        done = prime_process("gepa", "run", "vf-v1-shared", "-a", '{"num_tasks": 8}', "-m", "solver",
                             "-b", server.base_url, "-M", "solver", "--components", "system_prompt,tools", "-B", "30",
                             "--num-train", "4", "--num-val", "4", "--minibatch-size", "2", "--stop-at-score", "1",
                             "-o", "run", project=verifiers_project)
        sent = server.requests()
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((verifiers_project / "run" / "tools.json").read_text()) == {
        "calc_add": f"{SEED} Double-check the sum."}
    metadata = json.loads((verifiers_project / "run" / "metadata.json").read_text())
    assert "--tools-file" in metadata["verify_command"]
    assert described(sent) == {SEED, f"{SEED} Double-check the sum."}  # the seed's, then the proposal's


@pytest.mark.verifiers
def test_listing_the_tools_leaves_the_root_logger_as_it_was(verifiers_project, monkeypatch):
    """The MCP server object the tools are registered on configures logging when built; a GEPA run's terminal
    then filled with verifiers' INFO lines."""
    import logging

    monkeypatch.chdir(verifiers_project)
    env = load_environment("vf-v1-shared", {})
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])  # as in `prime` (pytest's own handlers would hide a change)
    monkeypatch.setattr(root, "level", logging.WARNING)
    assert [schema["function"]["name"] for schema in env.tool_schemas] == ["calc_add"]
    assert root.handlers == [] and root.level == logging.WARNING
