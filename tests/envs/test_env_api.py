"""The environment API contract: rubrics, parsers, prompts, the three env kinds, id resolution."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path
from typing import Literal

import pytest
from support.scripted_client import ScriptedClient, tool_call_reply

from evalkit.core.defaults import RolloutLimits
from evalkit.core.errors import ModelCallError, UserError
from evalkit.core.types import Completion, RolloutState
from evalkit.envs import MultiTurnEnv, Parser, Rubric, SingleTurnEnv, ThinkParser, ToolEnv, XMLParser, tool_schema
from evalkit.loading.resolve import load_environment, module_name_for, parse_env_args, resolve

ROWS = [{"question": "2+2?", "answer": "4"}, {"question": "3+3?", "answer": "6"}]


def _state(text: str = "4", answer: str = "4") -> RolloutState:
    return RolloutState(
        example_id=0,
        rollout_idx=0,
        prompt=[{"role": "user", "content": "q"}],
        answer=answer,
        info={"k": 1},
        completion=[{"role": "assistant", "content": text}],
    )


# ----- Rubric ---------------------------------------------------------------------------------
async def test_rubric_weighted_sum_and_weight_zero_metric():
    def right(completion, answer):
        return float(completion[-1]["content"] == answer)

    def length(completion):
        return len(completion[-1]["content"])

    score = await Rubric([right, length], weights=[0.5, 0.0]).score(_state("4"))
    assert score.reward == 0.5
    assert score.metrics == {"right": 1.0, "length": 1.0}
    assert score.errors == []


async def test_rubric_async_funcs_and_kwargs_injection():
    seen = {}

    async def async_reward(answer, info, parser, state, prompt, task):
        seen.update(answer=answer, info=info, parser=parser, state=state, prompt=prompt, task=task)
        return 1

    def takes_all(**kwargs):
        seen["all"] = sorted(kwargs)
        return 0.25

    parser = XMLParser(["answer"])
    score = await Rubric([async_reward, takes_all], parser=parser).score(_state())
    assert score.reward == 1.25
    assert seen["answer"] == "4" and seen["info"] == {"k": 1} and seen["parser"] is parser
    assert seen["prompt"] == [{"role": "user", "content": "q"}]
    assert seen["all"] == ["answer", "completion", "info", "parser", "prompt", "state", "task"]


async def test_rubric_exception_scores_zero_and_is_recorded():
    def boom(completion):
        raise ValueError("bad reward")

    def ok():
        return 1.0

    score = await Rubric([boom, ok]).score(_state())
    assert score.reward == 1.0
    assert score.metrics == {"boom": 0.0, "ok": 1.0}
    assert score.errors == ["reward function boom raised ValueError: bad reward"]


def test_rubric_weights_length_mismatch_is_rejected():
    with pytest.raises(ValueError, match="2 funcs but 1 weights"):
        Rubric([lambda: 1, lambda: 2], weights=[1.0])


# ----- Parsers --------------------------------------------------------------------------------
def test_parser_identity_and_extract_fn():
    assert Parser().parse_answer([{"role": "assistant", "content": "  hi  "}]) == "hi"
    parser = Parser(extract_fn=lambda t: t.split()[-1])
    completion = [
        {"role": "assistant", "content": "first 1"},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": "then 2"},
    ]
    assert parser.parse_answer(completion) == "2"
    assert Parser().format_score([{"role": "assistant", "content": " "}]) == 0.0


def test_xml_parser_fields_alternatives_and_format():
    parser = XMLParser(["think", ("answer", "final")])
    parsed = parser.parse("<think>hmm</think><final> 7 </final>")
    assert parsed.think == "hmm" and parsed.answer == "7"
    assert parser.parse_answer("<answer>1</answer> <answer>2</answer>") == "2"
    assert parser.parse_answer("no tags") is None
    assert parser.format_score("<think>a</think><answer>b</answer>") == 1.0
    assert parser.format_score("<answer>b</answer>") == 0.5
    assert parser.format_score("<answer>unclosed") == 0.0
    assert parser.format(think="x", answer="y") == "<think>\nx\n</think>\n<answer>\ny\n</answer>"
    assert parser.get_format_reward_func()("<think>a</think><answer>b</answer>") == 1.0


def test_think_parser():
    parser = ThinkParser()
    assert parser.parse_answer("<think>reason</think> 42") == "42"
    assert parser.format_score("<think>reason</think> 42") == 1.0
    assert parser.format_score("42") == 0.0


# ----- System prompt ----------------------------------------------------------------------------
def test_system_prompt_injection_and_override():
    env = SingleTurnEnv(dataset=ROWS, system_prompt="Be brief.")
    assert env.format_prompt(ROWS[0]) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "2+2?"},
    ]
    assert env.format_prompt(ROWS[0], system_prompt="GEPA says")[0] == {"role": "system", "content": "GEPA says"}
    row = {"prompt": [{"role": "system", "content": "row's own"}, {"role": "user", "content": "hi"}]}
    assert env.format_prompt(row)[0]["content"] == "row's own"  # the row's system message wins over the env's
    assert env.format_prompt(row, system_prompt="override")[0]["content"] == "override"
    no_system = SingleTurnEnv(dataset=ROWS)
    assert no_system.format_prompt(ROWS[0]) == [{"role": "user", "content": "2+2?"}]


async def test_rollout_sends_system_prompt_override_to_model():
    env = SingleTurnEnv(dataset=ROWS, system_prompt="env prompt")
    client = ScriptedClient(["4"])
    await env.rollout(client, ROWS[0], system_prompt="optimized prompt")
    assert client.requests[0]["messages"][0] == {"role": "system", "content": "optimized prompt"}


# ----- SingleTurnEnv --------------------------------------------------------------------------
def _exact(completion, answer, parser):
    return float(parser.parse_answer(completion) == answer)


async def test_single_turn_rollout_scores_and_records():
    env = SingleTurnEnv(dataset=ROWS, rubric=Rubric([_exact]), sampling_args={"max_tokens": 9})
    state = await env.rollout(ScriptedClient(["4"]), ROWS[0], example_id=3, rollout_idx=1)
    assert (state.reward, state.metrics, state.error) == (1.0, {"_exact": 1.0}, None)
    assert state.example_id == 3 and state.rollout_idx == 1 and state.turns == 1
    assert state.stop_condition == "completed"
    assert state.completion == [{"role": "assistant", "content": "4"}]
    assert state.usage.output_tokens == 1


async def test_single_turn_model_error_is_data_not_a_crash():
    env = SingleTurnEnv(dataset=ROWS, rubric=Rubric([_exact]))
    state = await env.rollout(ScriptedClient([ModelCallError("503 from server")]), ROWS[0])
    assert state.reward == 0.0 and state.stop_condition == "error"
    assert state.error == "model call failed: 503 from server"
    assert state.metrics == {"_exact": 0.0}


async def test_single_turn_truncation_is_flagged():
    env = SingleTurnEnv(dataset=ROWS, rubric=Rubric([_exact]))
    state = await env.rollout(ScriptedClient([Completion(text="4", finish_reason="length")]), ROWS[0])
    assert state.is_truncated and state.stop_condition == "length"


class _Hooked(SingleTurnEnv):
    """A native environment that overrides the skeleton's hooks, recording the order they run in."""

    def __init__(self, fail_scoring: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.calls: list[str] = []
        self.fail_scoring = fail_scoring

    def new_state(self, row, example_id, rollout_idx, system_prompt):
        self.calls.append("new_state")
        return super().new_state(row, example_id, rollout_idx, system_prompt)

    def sampling_for(self, sampling):
        self.calls.append("sampling_for")
        return super().sampling_for(sampling)

    async def generate(self, client, state, sampling):
        self.calls.append(f"generate max_tokens={sampling.max_tokens}")
        await super().generate(client, state, sampling)

    async def score_rollout(self, state, timeout):
        self.calls.append(f"score_rollout timeout={timeout}")
        if self.fail_scoring:
            raise RuntimeError("judge offline")
        await super().score_rollout(state, timeout)


async def test_rollout_is_one_skeleton_calling_hooks_in_order():
    env = _Hooked(dataset=ROWS, rubric=Rubric([_exact]), sampling_args={"max_tokens": 9})
    state = await env.rollout(ScriptedClient(["4"]), ROWS[0], limits=RolloutLimits(score_timeout=5.0))
    assert env.calls == ["new_state", "sampling_for", "generate max_tokens=9", "score_rollout timeout=5.0"]
    assert (
        state.reward == 1.0
        and state.usage.output_tokens == 1
        and set(state.timing) == {"generation_ms", "scoring_ms", "total_ms"}
    )
    failed = await env.rollout(ScriptedClient([ModelCallError("503")]), ROWS[0])
    assert env.calls[-1].startswith("score_rollout") and failed.metrics == {
        "_exact": 0.0
    }  # called for errored rollouts too
    broken = _Hooked(fail_scoring=True, dataset=ROWS, rubric=Rubric([_exact]))
    state = await broken.rollout(ScriptedClient(["4"]), ROWS[0])  # a raising hook is a row, never a crash
    assert (state.error, state.error_kind, state.reward) == (
        "scoring raised RuntimeError: judge offline",
        "environment",
        0.0,
    )
    assert state.stop_condition == "completed" and not state.scored


def test_dataset_needs_prompt_or_question():
    with pytest.raises(UserError, match="'prompt' .* or 'question'"):
        SingleTurnEnv(dataset=[{"text": "x"}])
    with pytest.raises(UserError, match="needs a dataset"):
        SingleTurnEnv()


def test_get_dataset_falls_back_and_shuffles_deterministically():
    rows = [{"question": str(i), "answer": str(i)} for i in range(20)]
    env = SingleTurnEnv(dataset=rows)
    assert env.get_eval_dataset(3) == rows[:3]
    assert env.get_dataset(5, seed=1, shuffle=True) == env.get_dataset(5, seed=1, shuffle=True)
    assert env.get_dataset(5, seed=1, shuffle=True) != rows[:5]
    assert len(env.get_dataset(-1)) == 20


# ----- MultiTurnEnv ---------------------------------------------------------------------------
class CountingEnv(MultiTurnEnv):
    """Replies 'again' until the model says 'done'."""

    def is_completed(self, messages, state):
        return "said_done" if messages[-1].get("content") == "done" else False

    def env_response(self, messages, state):
        state.setdefault("seen", []).append(messages[-1]["content"])
        return {"role": "user", "content": "again"}


async def test_multi_turn_stops_at_max_turns():
    env = CountingEnv(dataset=ROWS, max_turns=3, rubric=Rubric([lambda state: len(state["seen"])]))
    state = await env.rollout(ScriptedClient(["a", "b", "c", "d"]), ROWS[0])
    assert state.stop_condition == "max_turns" and state.turns == 3
    assert [m["role"] for m in state.completion] == ["assistant", "user", "assistant", "user", "assistant"]
    assert state.extra["seen"] == ["a", "b"] and state.reward == 2.0


async def test_multi_turn_custom_stop_condition():
    env = CountingEnv(dataset=ROWS, max_turns=10)
    state = await env.rollout(ScriptedClient(["a", "done"]), ROWS[0])
    assert state.stop_condition == "said_done" and state.turns == 2


async def test_multi_turn_env_response_error_is_recorded():
    class Broken(MultiTurnEnv):
        def env_response(self, messages, state):
            raise RuntimeError("game bug")

    state = await Broken(dataset=ROWS, max_turns=3).rollout(ScriptedClient(["a"]), ROWS[0])
    assert state.error == "environment raised RuntimeError: game bug" and state.reward == 0.0


async def test_multi_turn_minus_one_means_no_turn_cap():
    replies = [str(i) for i in range(14)] + ["done"]
    state = await CountingEnv(dataset=ROWS, max_turns=-1).rollout(ScriptedClient(replies), ROWS[0])
    assert state.stop_condition == "said_done" and state.turns == 15


# ----- ToolEnv --------------------------------------------------------------------------------
def add(a: int, b: int = 1) -> int:
    """Add two integers.

    Args:
        a: the first number.
        b: the second number,
            one by default.
    """
    return a + b


def pick(mode: Literal["x", "y"], tags: list[str] | None = None, scale: float = 1.0, flag: bool = False) -> str:
    """Pick something."""
    return mode


def fails(x: str) -> str:
    """Always raises."""
    raise KeyError(x)


def test_tool_schema_from_signature_and_docstring():
    schema = tool_schema(add)
    assert schema["type"] == "function"
    function = schema["function"]
    assert function["name"] == "add" and function["description"] == "Add two integers."
    assert function["parameters"]["required"] == ["a"]
    assert function["parameters"]["properties"]["a"] == {"type": "integer", "description": "the first number."}
    assert function["parameters"]["properties"]["b"]["description"] == "the second number, one by default."
    props = tool_schema(pick)["function"]["parameters"]["properties"]
    assert props["mode"] == {"type": "string", "enum": ["x", "y"]}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["scale"] == {"type": "number"} and props["flag"] == {"type": "boolean"}


async def test_tool_env_runs_tools_and_returns_errors_as_text():
    env = ToolEnv(dataset=ROWS, tools=[add, fails], max_turns=10)
    client = ScriptedClient(
        [
            tool_call_reply("add", '{"a": 2, "b": 3}', "c1"),
            tool_call_reply("add", "{not json", "c2"),
            tool_call_reply("add", '{"zzz": 1}', "c3"),
            tool_call_reply("fails", '{"x": "k"}', "c4"),
            tool_call_reply("nope", "{}", "c5"),
            tool_call_reply("add", "[1, 2]", "c6"),
            "the answer is 5",
        ]
    )
    state = await env.rollout(client, ROWS[0])
    assert state.error is None and state.stop_condition == "no_tool_calls" and state.turns == 7
    tool_messages = [m for m in state.completion if m["role"] == "tool"]
    contents = [m["content"] for m in tool_messages]
    assert contents[0] == "5"
    assert contents[1].startswith("Error: arguments for add are not valid JSON")
    assert contents[2].startswith("Error: bad arguments for add")
    assert contents[3] == "Error: fails raised KeyError: 'k'"
    assert contents[4].startswith("Error: unknown tool 'nope'; available tools: add, fails")
    assert contents[5] == "Error: arguments for add must be a JSON object"
    assert [m["tool_call_id"] for m in tool_messages] == ["c1", "c2", "c3", "c4", "c5", "c6"]
    assert client.requests[0]["tools"] == [tool_schema(add), tool_schema(fails)]


async def test_tool_env_max_turns():
    env = ToolEnv(dataset=ROWS, tools=[add], max_turns=2)
    state = await env.rollout(ScriptedClient([tool_call_reply("add", '{"a": 1}')]), ROWS[0])
    assert state.stop_condition == "max_turns" and state.turns == 2


# ----- Resolution -----------------------------------------------------------------------------
LOCAL_ENV = textwrap.dedent(
    '''
    """A local test environment."""
    from evalkit.envs import SingleTurnEnv

    def load_environment(n: int = 2, fail: bool = False):
        if fail:
            raise RuntimeError("cannot build")
        return SingleTurnEnv(dataset=[{"question": str(i), "answer": str(i)} for i in range(n)])
    '''
)


@pytest.fixture
def env_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "environments" / "my_local"
    folder.mkdir(parents=True)
    (folder / "my_local.py").write_text(LOCAL_ENV)
    return tmp_path / "environments"


@pytest.mark.parametrize("env_id", ["reverse-text", "primeintellect/reverse-text", "reverse_text"])
def test_builtin_resolution_forms(env_id, tmp_path):
    source = resolve(env_id, tmp_path / "environments")
    assert source.origin == "builtin" and source.module_name == "evalkit.builtin.reverse_text"
    env = load_environment(env_id, {"num_train_examples": 2, "num_eval_examples": 2}, tmp_path / "environments")
    assert isinstance(env, SingleTurnEnv) and env.env_id == "reverse-text"


def test_module_name_for():
    assert module_name_for("primeintellect/reverse-text") == "reverse_text"
    assert module_name_for("./environments/my_env/") == "my_env"
    # as verifiers' loader: the version after '@' dropped, the name lower-cased
    assert module_name_for("PrimeIntellect/Reverse-Text@0.1.2") == "reverse_text"


def test_hub_ids_with_a_version_resolve_like_verifiers(tmp_path):
    source = resolve("primeintellect/Reverse-Text@0.1.2", tmp_path / "environments")
    assert source.module_name == "evalkit.builtin.reverse_text" and source.env_id == "Reverse-Text"


def test_local_folder_resolution_by_id_and_path(env_dir, monkeypatch):
    assert resolve("my-local", env_dir).origin == "local"
    env = load_environment("my-local", {"n": 3}, env_dir)
    assert len(env.get_dataset()) == 3 and env.env_id == "my-local"
    monkeypatch.chdir(env_dir.parent)
    by_path = load_environment("./environments/my_local", {})
    assert len(by_path.get_dataset()) == 2


def test_local_folder_shadows_builtin(tmp_path):
    folder = tmp_path / "environments" / "arithmetic"
    folder.mkdir(parents=True)
    (folder / "arithmetic.py").write_text(LOCAL_ENV)
    assert resolve("arithmetic", tmp_path / "environments").origin == "local"


def test_unknown_env_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="unknown environment 'no-such-env'.*prime env init no-such-env"):
        resolve("no-such-env", tmp_path)
    with pytest.raises(UserError, match="no environment given"):
        resolve(" ", tmp_path)
    with pytest.raises(UserError, match="is not an environment folder"):
        resolve(str(tmp_path), tmp_path)


def test_load_environment_failures_are_user_errors(env_dir):
    with pytest.raises(UserError, match=r"load_environment\(\) of 'my-local' raised RuntimeError: cannot build"):
        load_environment("my-local", {"fail": True}, env_dir)
    with pytest.raises(UserError, match=r"does not accept env arg\(s\) \['bogus'\]; it accepts: n, fail"):
        load_environment("my-local", {"bogus": 1}, env_dir)
    with pytest.raises(UserError, match="does not accept env arg"):
        load_environment("arithmetic", {"difficullty": "easy"}, env_dir)
    with pytest.raises(UserError, match="unknown difficulty 'extreme'"):
        load_environment("arithmetic", {"difficulty": "extreme"}, env_dir)


def test_broken_local_modules_are_user_errors(tmp_path):
    root = tmp_path / "environments"
    (root / "syntax_bad").mkdir(parents=True)
    (root / "syntax_bad" / "syntax_bad.py").write_text("def load_environment(:\n")
    (root / "no_loader").mkdir()
    (root / "no_loader" / "no_loader.py").write_text("X = 1\n")
    (root / "wrong_type").mkdir()
    (root / "wrong_type" / "wrong_type.py").write_text("def load_environment():\n    return 42\n")
    with pytest.raises(UserError, match="failed to import: SyntaxError"):
        load_environment("syntax-bad", {}, root)
    with pytest.raises(UserError, match=r"has no load_environment\(\) function"):
        load_environment("no-loader", {}, root)
    with pytest.raises(UserError, match="returned int, not an Environment"):
        load_environment("wrong-type", {}, root)


def test_parse_env_args():
    assert parse_env_args('{"difficulty": "easy", "n": 2}') == {"difficulty": "easy", "n": 2}
    assert parse_env_args(None) == {} and parse_env_args("") == {}
    assert parse_env_args({"a": 1}) == {"a": 1}
    with pytest.raises(UserError, match="not valid JSON"):
        parse_env_args("{difficulty: easy}")
    with pytest.raises(UserError, match="must be a JSON object"):
        parse_env_args(json.dumps([1, 2]))


def test_unrelated_folder_named_like_an_id_does_not_hide_the_builtin(tmp_path, monkeypatch):
    (tmp_path / "arithmetic").mkdir()  # e.g. a folder of the user's outputs
    monkeypatch.chdir(tmp_path)
    assert resolve("arithmetic", tmp_path / "environments").origin == "builtin"
    (tmp_path / "arithmetic" / "arithmetic.py").write_text(LOCAL_ENV)
    assert resolve("arithmetic", tmp_path / "environments").origin == "local"  # a real env folder is a path


# ----- verifiers habits the native API accepts ---------------------------------------------------
async def test_async_setup_state_is_awaited():
    class Seeded(CountingEnv):
        async def setup_state(self, state):
            await asyncio.sleep(0)
            state["seen"] = ["seeded"]

    env = Seeded(dataset=ROWS, max_turns=2, rubric=Rubric([lambda state: len(state["seen"])]))
    state = await env.rollout(ScriptedClient(["a", "done"]), ROWS[0])
    assert state.extra["seen"] == ["seeded", "a"] and state.reward == 2.0


def test_dataset_builders_run_on_first_use_and_only_for_the_split_used():
    built = []

    def train():
        built.append("train")
        return [{"question": "t", "answer": "t"}]

    def evaluation():
        built.append("eval")
        return [{"question": "e", "answer": "e"}, {"question": "f", "answer": "f"}]

    env = SingleTurnEnv(dataset=train, eval_dataset=evaluation)
    assert built == []
    assert [r["question"] for r in env.get_eval_dataset()] == ["e", "f"] and built == ["eval"]
    env.get_eval_dataset()
    assert built == ["eval"]
    assert [r["question"] for r in env.get_dataset()] == ["t"] and built == ["eval", "train"]


def test_failing_dataset_builder_is_one_user_error():
    def broken():
        raise OSError("no network")

    env = SingleTurnEnv(dataset=broken, env_id="net-env")
    with pytest.raises(UserError, match="the dataset builder of environment 'net-env' raised OSError: no network"):
        env.get_dataset()
    with pytest.raises(UserError, match="dataset rows need a 'prompt'"):
        SingleTurnEnv(dataset=lambda: [{"text": "x"}]).get_dataset()


def test_few_shot_goes_between_system_prompt_and_question():
    shots = [{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "2"}]
    env = SingleTurnEnv(dataset=ROWS, system_prompt="Be brief.", few_shot=shots)
    assert env.format_prompt({"question": "2+2?"}) == [
        {"role": "system", "content": "Be brief."}, *shots, {"role": "user", "content": "2+2?"}]
    assert env.format_prompt({"question": "2+2?"}, system_prompt="GEPA")[0] == {"role": "system", "content": "GEPA"}
    own = [{"role": "user", "content": "own prompt"}]
    assert env.format_prompt({"prompt": own}) == [{"role": "system", "content": "Be brief."}, *own]  # as verifiers


def test_parser_role_helpers():
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                {"role": "assistant", "content": "a1"}, {"role": "tool", "content": "t", "tool_call_id": "1"},
                {"role": "assistant", "content": "a2"}]
    parser = XMLParser(["answer"])
    assert [m["content"] for m in parser.get_assistant_messages(messages)] == ["a1", "a2"]
    assert [m["content"] for m in parser.get_user_messages(messages)] == ["u"]
    assert [m["content"] for m in parser.get_system_messages(messages)] == ["s"]
    assert [m["content"] for m in parser.get_tool_messages(messages)] == ["t"]
