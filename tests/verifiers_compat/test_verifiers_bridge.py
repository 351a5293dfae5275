"""The verifiers wrapper at library level: what RL needs from a rollout (per-turn token ids through the bridge),
errors as rows, group scoring through run_groups, and loading errors as one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support import VERIFIERS_ENVS

from evalkit.core.defaults import RolloutLimits

pytest.importorskip(
    "verifiers", reason="needs the verifiers extra: pip install 'primekit[verifiers]' (make test installs it)"
)

from support.scripted_client import ScriptedClient, tool_call_reply

from evalkit.core.errors import ModelCallError, UserError
from evalkit.core.types import Completion, SamplingArgs, Usage
from evalkit.eval.rollouts import run_groups
from evalkit.loading.resolve import load_environment
from evalkit.verifiers_compat.v1.env import TasksetEnvironment

ENVS = VERIFIERS_ENVS


@pytest.fixture
def environments(tmp_path: Path, monkeypatch) -> Path:
    shutil.copytree(ENVS, tmp_path / "environments", ignore=shutil.ignore_patterns("README.md", "__pycache__"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "environments"


def with_tokens(text: str, prompt_len: int = 3) -> Completion:
    """What the embedded engine returns: text plus token ids and logprobs."""
    ids = list(range(100, 100 + len(text.split()) + 1))
    return Completion(text=text, usage=Usage(prompt_len, len(ids)), prompt_token_ids=list(range(prompt_len)),
                      completion_token_ids=ids, logprobs=[-0.5] * len(ids))


async def test_legacy_rollout_keeps_the_clients_completion_per_turn(environments):
    from evalkit.verifiers_compat.legacy.env import VerifiersEnvironment  # the legacy API: verifiers 0.3.1 only

    env = load_environment("vf-counter", {"num_examples": 1})
    assert isinstance(env, VerifiersEnvironment)
    row = env.get_eval_dataset(n=1)[0]  # target 2: two model turns
    replies = [with_tokens("1", 5), with_tokens("2", 9)]
    client = ScriptedClient(replies)
    state = await env.rollout(client, row, sampling=SamplingArgs(max_tokens=8, logprobs=True))
    assert state.error is None and state.turns == 2 and state.reward == 1.0
    assert state.responses == replies  # the very Completion objects, token ids and logprobs included
    assert [r["sampling"].logprobs for r in client.requests] == [True, True]
    assert state.usage.input_tokens == 14 and state.extra["target"] == 2


async def test_tool_env_gets_tool_schemas_and_runs_async_tools(environments):
    env = load_environment("vf-tools", {"num_examples": 1})
    row = env.get_eval_dataset(n=1)[0]
    client = ScriptedClient([tool_call_reply("add", '{"a": 3, "b": 4}'), "The answer is 7."])
    state = await env.rollout(client, row)
    assert state.reward == 1.0 and state.metrics["add_calls"] == 1.0 and state.stop_condition == "no_tools_called"
    schema = client.requests[0]["tools"][0]["function"]
    assert schema["name"] == "add" and schema["parameters"]["required"] == ["a", "b"]
    assert state.completion[1] == {"role": "tool", "content": "7", "tool_call_id": "call_0"}


async def test_failed_model_call_is_an_error_row(environments):
    env = load_environment("vf-single", {})
    row = env.get_eval_dataset(n=1)[0]
    state = await env.rollout(ScriptedClient([ModelCallError("HTTP 503 from server")]), row)
    assert state.error.startswith("model call failed: ModelError") and "HTTP 503 from server" in state.error
    assert state.reward == 0.0 and state.metrics == {} and state.stop_condition == "has_error"


async def test_exception_escaping_env_code_is_an_error_row(environments):
    env = load_environment("vf-counter", {})
    row = env.get_eval_dataset(n=1)[0]
    env.vf_env.env_response = _raise  # a bug in the user's env_response (not a vf.Error, so verifiers lets it escape)
    state = await env.rollout(ScriptedClient(["7"]), row)
    assert state.error == "environment raised RuntimeError: bug in env_response" and state.reward == 0.0


async def _raise(*args, **kwargs):
    raise RuntimeError("bug in env_response")


async def test_error_kinds_of_wrapped_rollouts(environments):
    env = load_environment("vf-single", {})
    row = env.get_eval_dataset(n=1)[0]
    state = await env.rollout(ScriptedClient([ModelCallError("HTTP 503 from server")]), row)
    assert state.to_row()["error_kind"] == "model" and not state.scored
    buggy = load_environment("vf-buggy", {})
    state = await buggy.rollout(ScriptedClient(["1"]), buggy.get_eval_dataset(n=1)[0])
    assert state.error_kind == "reward" and state.scored


SLOW_ENV = """
import time
import verifiers as vf
from datasets import Dataset


def load_environment(sleep_s: float = 1.0):
    def slow(completion) -> float:
        time.sleep(sleep_s)
        return 1.0

    rows = [{"question": f"q{i}", "answer": "a"} for i in range(4)]
    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), rubric=vf.Rubric(funcs=[slow]))
"""


@pytest.mark.timing
async def test_slow_sync_reward_function_of_a_verifiers_env_runs_off_the_loop(environments):
    import time

    (environments / "vf_slow").mkdir()
    (environments / "vf_slow" / "vf_slow.py").write_text(SLOW_ENV)
    env = load_environment("vf-slow", {"sleep_s": 1.0})
    started = time.perf_counter()
    groups = await run_groups(env, ScriptedClient(["a"]), env.get_eval_dataset(), rollouts_per_example=1)
    assert time.perf_counter() - started < 3.0  # 4 x 1 s one after the other on the event loop before
    assert [g[0].reward for g in groups] == [1.0] * 4
    state = await env.rollout(
        ScriptedClient(["a"]), env.get_eval_dataset(n=1)[0], limits=RolloutLimits(score_timeout=0.2)
    )
    assert state.error_kind == "timeout" and "scoring timed out after 0.2 s" in state.error and not state.scored


async def test_group_rubric_is_scored_once_per_group_by_run_groups(environments):
    env = load_environment("vf-group", {"num_examples": 2})
    assert env.group_scored
    rows = env.get_eval_dataset()
    groups = await run_groups(env, ScriptedClient(lambda m, s, t: "0" if "0+0" in m[-1]["content"] else "x"), rows,
                              rollouts_per_example=4)
    first, second = groups
    assert [s.reward for s in first] == [1.5] * 4 and [s.metrics["group_size"] for s in first] == [4.0] * 4
    assert [s.reward for s in second] == [0.5] * 4  # wrong but unanimous: consensus only


@pytest.mark.verifiers
async def test_v1_rollout_keeps_token_ids_through_the_http_bridge(environments):
    env = load_environment("vf-v1-math", {"num_tasks": 2})
    assert isinstance(env, TasksetEnvironment) and env.system_prompt == "Reply with the number only."
    rows = env.get_eval_dataset(n=2)
    reply = with_tokens("3", 7)
    client = ScriptedClient([reply])
    state = await env.rollout(client, rows[1], sampling=SamplingArgs(max_tokens=5, logprobs=True))
    assert state.error is None and state.reward == 1.0 and state.turns == 1
    assert [r.completion_token_ids for r in state.responses] == [reply.completion_token_ids]
    assert [r.logprobs for r in state.responses] == [reply.logprobs]
    sent = client.requests[0]
    assert sent["messages"][0] == {"role": "system", "content": "Reply with the number only."}
    assert sent["sampling"].max_tokens == 5 and sent["sampling"].logprobs is True


@pytest.mark.verifiers
async def test_v1_system_prompt_override_and_failed_model_call(environments):
    env = load_environment("vf-v1-math", {})
    row = env.get_eval_dataset(n=1)[0]
    client = ScriptedClient(["1"])
    state = await env.rollout(client, row, system_prompt="Only digits.")
    assert state.prompt[0] == {"role": "system", "content": "Only digits."}
    assert client.requests[0]["messages"][0] == {"role": "system", "content": "Only digits."}
    failed = await env.rollout(ScriptedClient([ModelCallError("HTTP 500")]), row)
    assert failed.reward == 0.0 and failed.error is not None and "HTTP 500" in failed.error
    # the kind comes from verifiers' error type where the wrapper reads it; the message is verifiers' own
    assert failed.error_kind == "model" and failed.error.startswith("ProviderError: ") and not failed.scored
    # verifiers 0.4 names the stop itself (its trace says provider_error); 0.3.1 leaves it to the skeleton
    assert failed.metrics == {} and failed.stop_condition in ("error", "provider_error")
    missing = await env.rollout(client, {**row, "info": {"task_key": "no-such-task"}})
    assert missing.error_kind == "environment" and "row names no task" in missing.error


@pytest.mark.verifiers
def test_v1_env_args_are_the_taskset_config(environments):
    assert len(load_environment("vf-v1-math", {"num_tasks": 5}).get_eval_dataset()) == 5
    with pytest.raises(UserError, match="env args for v1 taskset 'vf-v1-math' are invalid: .*num_taskz"):
        load_environment("vf-v1-math", {"num_taskz": 5})


def test_verifiers_dataset_builder_failure_is_one_line(environments):
    folder = environments / "vf_nodata"
    folder.mkdir()
    (folder / "vf_nodata.py").write_text(
        "import verifiers as vf\n\n"
        "def load_environment():\n"
        "    def build():\n        raise OSError('dataset server unreachable')\n"
        "    return vf.SingleTurnEnv(dataset=build, rubric=vf.Rubric())\n"
    )
    env = load_environment("vf-nodata", {})
    with pytest.raises(UserError, match="failed to build: OSError: dataset server unreachable"):
        env.get_eval_dataset()


@pytest.mark.slow
async def test_embedded_model_turns_carry_token_ids_for_rl(environments):
    pytest.importorskip("evalkit.clients.local", reason="the embedded engine has not landed in this tree")
    from evalkit.clients.factory import make_client
    from evalkit.clients.spec import ClientSpec

    client = make_client(ClientSpec(model="local/smollm2-135m"))
    sampling = SamplingArgs(max_tokens=4, logprobs=True)
    for env_id in ("vf-counter", "vf-v1-math"):
        env = load_environment(env_id, {})
        (group,) = await run_groups(env, client, env.get_eval_dataset(n=1), rollouts_per_example=1, sampling=sampling)
        state = group[0]
        assert state.error is None and state.turns >= 1 and len(state.responses) == state.turns, env_id
        for response in state.responses:
            assert response.prompt_token_ids and response.completion_token_ids, env_id
            assert len(response.logprobs) == len(response.completion_token_ids), env_id


async def test_env_group_routes_each_row_to_its_environment(environments):
    env = load_environment("vf-mix", {})
    rows = env.get_eval_dataset()
    assert [r["info"]["env_id"] for r in rows] == ["small", "large"]
    groups = await run_groups(env, ScriptedClient(lambda m, s, t: "2" if "1+1" in m[-1]["content"] else "25"), rows)
    # as vf-eval (EnvGroup.run_group): the member a row routes to scores it, so a row has only its functions
    assert [(g[0].reward, g[0].metrics) for g in groups] == [
        (1.0, {"exact": 1.0, "num_turns": 1.0}),
        (2.0, {"double_exact": 2.0, "num_turns": 1.0})]


def test_an_untested_verifiers_version_is_refused_with_the_fix(environments, monkeypatch):
    import verifiers

    monkeypatch.setattr(verifiers, "__version__", "0.5.0")
    for env_id in ("vf-single", "vf-v1-math"):
        with pytest.raises(UserError, match=r"verifiers 0.5.0 is installed, but primekit runs verifiers environments "
                                             r"with 0.3.1 or 0.4.x only; install one extra: pip install "
                                             r"'primekit\[verifiers\]' \(verifiers 0.4, v1 tasksets\) or pip install "
                                             r"'primekit\[verifiers-legacy\]'"):
            load_environment(env_id, {})


@pytest.mark.verifiers
async def test_v1_bridge_serves_only_requests_with_its_token():
    import os

    import aiohttp

    from evalkit.verifiers_compat.v1.bridge import ModelBridgeServer, bridge_key_var

    client = ScriptedClient([with_tokens("hello")])
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "temperature": 0.0}
    async with ModelBridgeServer(client) as bridge, aiohttp.ClientSession() as http:
        url = f"{bridge.base_url}/chat/completions"
        async with http.post(url, json=body) as refused:
            assert refused.status == 401
        token = os.environ[bridge_key_var()]
        async with http.post(url, json=body, headers={"Authorization": f"Bearer {token}"}) as answered:
            data = await answered.json()
    assert data["choices"][0]["message"] == {"role": "assistant", "content": "hello"}
    [(trace_id, completion)] = bridge.take({None})
    assert trace_id is None and data["choices"][0]["token_ids"] == completion.completion_token_ids
    assert len(client.requests) == 1 and client.requests[0]["sampling"].max_tokens == 3
    assert client.requests[0]["sampling"].temperature == 0.0


@pytest.mark.verifiers
async def test_v1_bridge_hands_each_trace_its_own_calls_in_order():
    """One bridge serves a run's rollouts: verifiers' X-Session-ID (the trace id) says whose each request is."""
    import os

    import aiohttp

    from evalkit.verifiers_compat.v1.bridge import SESSION_HEADER, ModelBridgeServer, bridge_key_var

    client = ScriptedClient(["a1", "b1", "a2"])
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
    async with ModelBridgeServer(client) as bridge, aiohttp.ClientSession() as http:
        auth = f"Bearer {os.environ[bridge_key_var()]}"
        for trace in ("a", "b", "a"):
            async with http.post(f"{bridge.base_url}/chat/completions", json=body,
                                 headers={"Authorization": auth, SESSION_HEADER: trace}) as answered:
                assert answered.status == 200
        assert [(t, c.text) for t, c in bridge.take({"a"})] == [("a", "a1"), ("a", "a2")]
        assert bridge.take({"a"}) == []  # handed over once
        assert [(t, c.text) for t, c in bridge.take({"b", "c"})] == [("b", "b1")]
