"""Multi-turn rollouts as samples, and the chat-template check before multi-turn RL.

The breaking template is the tiny model's ChatML with one change, the one Qwen3-style templates make:
an assistant turn that is not the last message loses its ``<think>...</think>`` reasoning. Then the
second turn's prompt no longer starts with what the first turn sampled, and ``interleaved`` must
refuse (or, with ``retokenize``, start a new sample there); ``branching`` stays exact.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import torch
from support.rl_project import ScriptedSource  # a rollout source whose client is a script
from support.tiny_model import CHAT_TEMPLATE, build_tokenizer, write_tiny_model
from typer.testing import CliRunner

from evalkit.clients.local import to_completion
from evalkit.core.errors import UserError
from evalkit.core.types import Completion, RolloutState, SamplingArgs
from evalkit.model.chat_format import render_messages
from evalkit.model.requests import GenerationResult
from primekit_cli.app import app
from rl_backend.trajectories import check_prefix_property, first_break, interleave, refusal

DROPS_REASONING = CHAT_TEMPLATE.replace(
    "{{ message['content'] }}",
    "{% if message['role'] == 'assistant' and not loop.last %}{{ message['content'].split('</think>')[-1] }}"
    "{% else %}{{ message['content'] }}{% endif %}",
)
REPLIES = ["<think>count up</think>1", "<think>one more</think>2"]


def _encode(tokenizer, messages) -> list[int]:
    ids = tokenizer.apply_chat_template(render_messages(messages), tokenize=True, add_generation_prompt=True)
    return [int(i) for i in (ids["input_ids"] if hasattr(ids, "keys") else ids)]


def _rollout(tokenizer, example: int = 0) -> RolloutState:
    """Two model turns as the sampler saw and drew them (prompt ids rendered by ``tokenizer``'s template)."""
    messages = [{"role": "user", "content": "count"}]
    state = RolloutState(example_id=example, rollout_idx=0, prompt=list(messages))
    for reply in REPLIES:
        prompt = _encode(tokenizer, messages)
        completion = tokenizer(reply, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        state.responses.append(Completion(text=reply, prompt_token_ids=prompt, completion_token_ids=completion,
                                          logprobs=[-1.0] * len(completion)))
        messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": "next"}]
    return state


def _tokenizer(template: str):
    tokenizer = build_tokenizer()
    tokenizer.chat_template = template
    return tokenizer


def test_the_check_finds_the_first_token_where_a_template_rewrites_an_earlier_turn():
    plain, drops = _tokenizer(CHAT_TEMPLATE), _tokenizer(DROPS_REASONING)
    assert first_break(_rollout(plain)) is None and check_prefix_property([_rollout(plain)]) == (1, None)
    state = _rollout(drops)
    found = first_break(state)
    first_turn = state.responses[0]
    assert found is not None and found.turn == 2
    assert found.position == len(first_turn.prompt_token_ids)  # right where the sampled reasoning began
    assert drops.decode([found.expected]) == "<" and drops.decode([found.got]) == "1"
    message = str(refusal(found, drops, "tiny"))
    assert f"first differ at token {found.position}" in message and "'<'" in message and "'1'" in message
    assert "trajectory_strategy = 'interleaved'" in message and "retokenize = true" in message


def test_interleaved_samples_mask_the_environment_and_split_only_when_told():
    plain, drops = _tokenizer(CHAT_TEMPLATE), _tokenizer(DROPS_REASONING)
    state = _rollout(plain)
    (sample,) = interleave([[state]], {(0, 0): 0.5}, retokenize=False)
    first, second = state.responses
    assert sample.prompt_ids == first.prompt_token_ids
    assert sample.prompt_ids + sample.completion_ids == second.prompt_token_ids + second.completion_token_ids
    between = len(second.prompt_token_ids) - len(first.prompt_token_ids) - len(first.completion_token_ids)
    assert sample.mask() == [True] * len(first.completion_token_ids) + [False] * between + [True] * len(
        second.completion_token_ids
    )
    assert sample.trained_tokens == len(first.completion_token_ids) + len(second.completion_token_ids)
    broken = _rollout(drops)
    with pytest.raises(UserError, match="first differ at token"):
        interleave([[broken]], {(0, 0): 0.5}, retokenize=False, tokenizer=drops)
    parts = interleave([[broken]], {(0, 0): 0.5}, retokenize=True)
    assert [p.prompt_ids for p in parts] == [r.prompt_token_ids for r in broken.responses]


# -- before multi-turn RL: the check on real rollouts of a run --------------------------------------

ENV_CODE = '''
from evalkit.envs import MultiTurnEnv, Rubric


class Count(MultiTurnEnv):
    def env_response(self, messages, state):
        return {"role": "user", "content": "next"}


def last_digit(completion) -> float:
    return float(completion[-1]["content"].endswith("2"))


def load_environment(**kwargs):
    rows = [{"question": "count", "answer": "2"} for _ in range(16)]
    return Count(dataset=rows, eval_dataset=rows[:2], rubric=Rubric([last_digit]), max_turns=2)
'''


class ScriptedThinker:
    """Replies with reasoning, rendering each prompt through the engine's path with the model's own template."""

    def __init__(self, model_dir: Path):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        self.lock = threading.Lock()
        self.count = 0

    def __call__(self, messages, sampling: SamplingArgs, tools) -> Completion:
        with self.lock:
            self.count += 1
            wrong = self.count % 3 == 0  # some groups with varied rewards
        turn = sum(1 for m in messages if m["role"] == "assistant")
        text = REPLIES[turn].replace("2", "3") if wrong and turn else REPLIES[turn]
        prompt = _encode(self.tokenizer, messages)
        completion = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
        with torch.no_grad():
            logits = self.model(input_ids=torch.tensor([prompt + completion])).logits[0, len(prompt) - 1 : -1]
            logprobs = (
                torch.log_softmax(logits.float(), -1).gather(1, torch.tensor(completion)[:, None]).squeeze(1).tolist()
            )
        return to_completion(GenerationResult(text, "stop", prompt, completion, logprobs), tools_given=False)


@pytest.fixture(scope="module")
def thinking_model(tmp_path_factory) -> Path:
    folder = write_tiny_model(tmp_path_factory.mktemp("tiny") / "model")
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["chat_template"] = DROPS_REASONING
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("strategy, extra, ok", [("interleaved", "", False), ("interleaved", "retokenize = true", True),
                                                 ("branching", "", True)])
def test_multi_turn_rl_checks_the_template_on_real_rollouts_first(
    tmp_path, thinking_model, monkeypatch, strategy, extra, ok
):
    import rl_backend.sources as sources

    script = ScriptedThinker(thinking_model)

    monkeypatch.setattr(sources, "make_source", lambda backend, config, policy, run_dir: ScriptedSource(policy, script))
    env_dir = tmp_path / "environments" / "count"
    env_dir.mkdir(parents=True)
    (env_dir / "count.py").write_text(ENV_CODE)
    (tmp_path / "rl.toml").write_text(
        f'model = "{thinking_model}"\nrun_name = "t"\nmax_steps = 1\nbatch_size = 4\nrollouts_per_example = 2\n'
        f'trajectory_strategy = "{strategy}"\n{extra}\n[sampling]\nmax_tokens = 40\n[[env]]\nid = "{env_dir}"\n'
        '[filter]\nenabled = false\n[ckpt]\nsave_weights = false\n'
        '[baseline]\nnum_examples = 2\nmin_reward = 0.0\nmax_reward = 1.0\nmin_diverse_groups = 0.0\n'
    )
    result = CliRunner().invoke(app, ["rl", "run", str(tmp_path / "rl.toml"), "-o", str(tmp_path / "out")])
    if not ok:
        assert result.exit_code == 2 and "first differ at token" in result.output, result.output
        assert not (tmp_path / "out" / "rl" / "t" / "metrics.jsonl").exists()  # refused before any training step
        return
    assert result.exit_code == 0, result.output
    assert "does not extend turn 1's prompt and completion into turn 2's prompt" in result.output.replace("\n", "")
    steps = [json.loads(line) for line in (tmp_path / "out" / "rl" / "t" / "metrics.jsonl").read_text().splitlines()]
    assert steps[-1]["step"] == 1 and steps[-1]["samples"] == 8  # 4 rollouts x 2 turns: each turn its own sample
