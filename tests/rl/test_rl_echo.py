"""`echo`: GRPO on the policy's tokens plus weighted cross-entropy on the environment's messages by role. The roles
of the tokens between two replies by hand (the tiny tokenizer is one token per character), the samples that carry
them (branching and interleaved), the loss by hand, and a run on the built-in multi-turn wordle."""

from __future__ import annotations

import json

import pytest
from support.tiny_model import build_tokenizer
from typer.testing import CliRunner

from evalkit.core.types import Completion, RolloutState
from evalkit.model.chat_format import encode_chat
from primekit_cli.app import app
from rl_backend.observations import between_roles, carry_observations, role_weights, tail_roles

PROMPT = [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}]


def _rollout(tokenizer) -> RolloutState:
    """Two replies ("a1", "a2") around one user message ("fb"), each turn's ids as the embedded engine renders them."""
    completion = [{"role": "assistant", "content": "a1"}, {"role": "user", "content": "fb"},
                  {"role": "assistant", "content": "a2"}]
    responses = []
    for upto, text in ((0, "a1"), (2, "a2")):
        prompt_ids = encode_chat(tokenizer, PROMPT + completion[:upto])
        reply = tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]
        responses.append(Completion(text=text, prompt_token_ids=prompt_ids, completion_token_ids=reply,
                                    logprobs=[-1.0] * len(reply)))
    return RolloutState(example_id=0, rollout_idx=0, prompt=PROMPT, completion=completion, responses=responses,
                        reward=1.0)


def test_roles_of_the_tokens_between_two_replies_by_hand():
    tokenizer = build_tokenizer()
    state = _rollout(tokenizer)
    first, second = state.responses
    prefix = first.prompt_token_ids + first.completion_token_ids
    assert second.prompt_token_ids[: len(prefix)] == prefix  # the ChatML template keeps the prefix property
    between = len(second.prompt_token_ids) - len(prefix)
    # "\n" closing the reply's turn, then "<|im_start|>" "user" "\n" "fb" "<|im_end|>" "\n" (1 + 4 + 1 + 2 + 1 + 1),
    # then the generation prompt "<|im_start|>" "assistant" "\n" (1 + 9 + 1)
    assert between == 1 + 10 + 11
    assert tail_roles(state, 1, second.prompt_token_ids, tokenizer) == ["user"] * 10 + [None] * 11
    assert between_roles(state, 1, second.prompt_token_ids, between, tokenizer) == [None] + ["user"] * 10 + [None] * 11
    assert between_roles(state, 1, second.prompt_token_ids, 20, tokenizer) == [None] * 20  # fewer than the spans
    other = [*second.prompt_token_ids[:-3], 7, 7, 7]  # a prompt that does not end with the rendering
    assert tail_roles(state, 1, other, tokenizer) == []


def test_role_weights_by_hand():
    roles = [None, "user", "user", "tool", "assistant", "assistant", None]
    mask = [False, False, False, False, True, True, False]
    assert role_weights(roles, mask, {"user": 0.05, "tool": 0.25}) == [0, 0.05, 0.05, 0.25, 0, 0, 0]
    assert role_weights(roles, mask, {"assistant": 1.0}) == [0.0] * 7  # sampled tokens feed rl, never ce


def test_a_branching_sample_carries_the_environment_tokens_since_the_last_reply():
    from rl_backend.collect import checked_sample

    tokenizer = build_tokenizer()
    state = _rollout(tokenizer)
    second = state.responses[1]
    sample = checked_sample(second, 0.5)
    carry_observations(sample, state, 1, {"user": 0.1}, tokenizer)
    cut = len(second.prompt_token_ids) - 21
    assert sample.prompt_ids == second.prompt_token_ids[:cut]  # ends with the "\n" after the first reply's turn
    assert sample.completion_ids == second.prompt_token_ids[cut:] + second.completion_token_ids
    assert sample.mask() == [False] * 21 + [True] * 3
    assert sample.ce_weights == [0.1] * 10 + [0.0] * 11 + [0.0] * 3
    assert sample.ce_row() == sample.ce_weights and sample.component == "rl"
    assert sample.sampler_logprobs == [0.0] * 21 + [-1.0] * 3
    untouched = checked_sample(second, 0.5)
    carry_observations(untouched, state, 1, {"tool": 0.1}, tokenizer)  # no tool message: GRPO's sample
    assert untouched.prompt_ids == second.prompt_token_ids and untouched.ce_weights is None


def test_an_interleaved_sample_weights_the_same_tokens():
    from rl_backend.trajectories import interleave

    tokenizer = build_tokenizer()
    state = _rollout(tokenizer)
    [sample] = interleave([[state]], {(0, 0): 0.5}, retokenize=False, tokenizer=tokenizer, env_of={0: "e"},
                          echo_roles={"e": {"user": 0.1}})
    assert sample.mask() == [True] * 3 + [False] * 22 + [True] * 3
    assert sample.ce_weights == [0.0] * 3 + [0.0] + [0.1] * 10 + [0.0] * 14
    assert sample.roles[:3] == ["assistant"] * 3 and sample.roles[-3:] == ["assistant"] * 3


def test_the_loss_adds_ce_on_the_environment_tokens_over_their_own_count(tiny_model):
    """One sample: 2 reply tokens at advantage 0.5 (on-policy: -0.5 over the 2 rl tokens) and 3 environment tokens
    at weights 0.1, 0.1, 0.2: ce = -(0.1 lp0 + 0.1 lp1 + 0.2 lp2) / 3 (its own count), ``ce`` the unweighted mean."""
    from evalkit.model.scoring import score_tokens
    from rl_backend.config import RLConfig
    from rl_backend.policy import Policy, Sample

    config = RLConfig.model_validate({"model": str(tiny_model), "env": [{"id": "x"}], "trainer": {"lora": None}})
    policy = Policy(config)
    prompt, completion = [5, 6, 7], [30, 31, 32, 40, 41]
    scores = [s.logprob for s in score_tokens(policy.model, prompt + completion)[len(prompt):]]
    sample = Sample(prompt, completion, [0.0, 0.0, 0.0, scores[3], scores[4]], advantage=0.5,
                    loss_mask=[False, False, False, True, True], ce_weights=[0.1, 0.1, 0.2, 0.0, 0.0], env="e")
    stats = policy.train_step([sample], step=1)
    ce = -(0.1 * scores[0] + 0.1 * scores[1] + 0.2 * scores[2]) / 3
    assert stats["loss"] == pytest.approx(-0.5 + ce, abs=1e-4)
    assert stats["ce"] == pytest.approx(-(scores[0] + scores[1] + scores[2]) / 3, abs=1e-4)
    assert stats["train_tokens"] == 2  # the environment tokens are not in the rl mask


def _quick_to_stop(folder):
    """The tiny model, untied, with a residual feature that is always positive and read only by the end-of-turn
    token: it ends about a third of its tokens' draws there, so its wordle replies end and the game goes on."""
    import torch
    from support.tiny_model import write_tiny_model
    from transformers import AutoModelForCausalLM

    write_tiny_model(folder)
    net = AutoModelForCausalLM.from_pretrained(folder, tie_word_embeddings=False)
    eos = build_tokenizer().eos_token_id
    with torch.no_grad():
        head = net.get_input_embeddings().weight.clone()
        head[:, 0] = 0.0
        head[eos, 0] = 0.5
        net.lm_head.weight = torch.nn.Parameter(head)
        net.get_input_embeddings().weight[:, 0] = 20.0
    net.config.tie_word_embeddings = False
    net.save_pretrained(folder)
    return folder


@pytest.mark.slow
def test_echo_trains_on_wordles_feedback(tmp_path):
    model = _quick_to_stop(tmp_path / "model")
    config = tmp_path / "rl.toml"
    config.write_text(f'''model = "{model}"
run_name = "echo"
max_steps = 2
batch_size = 8
rollouts_per_example = 4
[algo]
type = "echo"
[algo.roles.user]
alpha = 0.1
[sampling]
max_tokens = 8
[[env]]
id = "wordle"
args = {{ max_turns = 2, num_train_examples = 8, num_eval_examples = 2 }}
[trainer]
lr = 1e-3
on_policy = true
[ckpt]
interval = 0
save_weights = false
[eval]
interval = 0
[baseline]
enabled = false
[filter]
enabled = false
''')
    result = CliRunner().invoke(app, ["rl", "run", str(config), "-o", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert "algorithm    echo (rl on sampled tokens + ce on environment tokens), roles user 0.1" in result.output
    rows = [json.loads(line) for line in (tmp_path / "o" / "rl" / "echo" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(row["ce"] > 0 and row["ce/wordle/mean"] == pytest.approx(row["ce"], abs=1e-5)
                                  for row in rows), rows
    assert "ce " in result.output
    assert rows[0]["train/agg/all/num_turns/mean"] > 1  # the feedback came between replies
    # GRPO's credit is 0 (every reward 0): the loss is the ce term, alpha times the mean NLL of the feedback tokens
    assert rows[0]["loss"] == pytest.approx(0.1 * rows[0]["ce"], abs=1e-3)
