"""`prime rl run` on the built-in tool environment: the training samples hold every tool-call turn.

The policy is the tiny random-weight Llama (real tensors, real trainer). A random model never calls a
tool, so a scripted rollout source stands in for the sampler: it searches, reads, then answers, and
returns for every turn the exact token ids of the prompt it saw (the embedded engine's chat
rendering, tools included) and of its reply, with logprobs the tiny model assigns to that reply by
teacher forcing. At step 1 the trainer's weights are still the sampler's, so its log-probabilities
must match those exactly: that checks the samples' ids line up token for token.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import pytest
import torch
from support.rl_project import ScriptedSource
from typer.testing import CliRunner

from evalkit.clients.local import to_completion
from evalkit.core.types import Completion, SamplingArgs
from evalkit.loading.resolve import load_environment
from evalkit.model.chat_format import render_messages
from evalkit.model.requests import GenerationResult
from primekit_cli.app import app

ENV_ARGS = {"num_train_examples": 12, "num_eval_examples": 4, "num_docs": 8, "max_turns": 4}


class ScriptedToolModel:
    """search -> read -> answer, every turn with token ids and teacher-forced logprobs."""

    def __init__(self, model_dir: Path, answers: dict[str, str]):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        self.answers = answers
        self.finals = 0
        self.lock = threading.Lock()
        self.sent: list[Completion] = []

    def __call__(self, messages, sampling: SamplingArgs, tools) -> Completion:
        text = self._reply(messages)
        rendered = render_messages(messages, tools)
        encoded = self.tokenizer.apply_chat_template(rendered, tokenize=True, add_generation_prompt=True)
        prompt = [int(i) for i in (encoded["input_ids"] if hasattr(encoded, "keys") else encoded)]
        completion = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
        with torch.no_grad():
            logits = self.model(input_ids=torch.tensor([prompt + completion])).logits[0, len(prompt) - 1 : -1]
            logp = torch.log_softmax(logits.float() / (sampling.temperature or 1.0), dim=-1)
            logprobs = logp.gather(1, torch.tensor(completion)[:, None]).squeeze(1).tolist()
        reply = to_completion(GenerationResult(text, "stop", prompt, completion, logprobs), tools_given=bool(tools))
        with self.lock:
            self.sent.append(reply)
        return reply

    def _reply(self, messages) -> str:
        tool_results = [m["content"] for m in messages if m["role"] == "tool"]
        if not tool_results:
            question = next(m["content"] for m in messages if m["role"] == "user")
            return _call("search", {"query": question})
        if len(tool_results) == 1:
            return _call("read", {"doc_id": json.loads(tool_results[0])[0]["doc_id"]})
        question = next(m["content"] for m in messages if m["role"] == "user")
        with self.lock:
            self.finals += 1
            right = self.finals % 2 == 0  # half right, half wrong: groups with a learning signal
        return f"<answer>{self.answers[question] if right else 'no idea'}</answer>"


def _call(name: str, arguments: dict) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def _config(tmp_path: Path, model: Path) -> Path:
    config = tmp_path / "rl.toml"
    config.write_text(
        f'''model = "{model}"
run_name = "tools"
max_steps = 2
batch_size = 4
rollouts_per_example = 2
max_concurrent = 4
[sampling]
max_tokens = 200
[[env]]
id = "fact-search"
args = {{ {", ".join(f"{k} = {v}" for k, v in ENV_ARGS.items())} }}
[trainer]
lr = 1e-3
micro_batch_size = 4
on_policy = true
[filter]
enabled = false
[ckpt]
interval = 1
[eval]
interval = 1
num_examples = 2
[baseline]
num_examples = 2
min_reward = 0.0
max_reward = 1.0
min_diverse_groups = 0.0
'''
    )
    return config


def _scripted_rollouts(tiny_model: Path, monkeypatch) -> ScriptedToolModel:
    """The trainer's rollout source becomes the script (the seam: ``rl_backend.sources.make_source``)."""
    import rl_backend.sources as sources

    env = load_environment("fact-search", ENV_ARGS)
    answers = {row["question"]: row["answer"] for row in env.get_dataset(-1) + env.get_eval_dataset(-1)}
    script = ScriptedToolModel(tiny_model, answers)
    monkeypatch.setattr(sources, "make_source", lambda backend, config, policy, run_dir: ScriptedSource(policy, script))
    return script


@pytest.mark.slow
def test_rl_run_trains_on_every_tool_call_turn(tmp_path, tiny_model, monkeypatch):
    import rl_backend.collect as collect

    script = _scripted_rollouts(tiny_model, monkeypatch)
    trained: list[list] = []
    real_to_samples = collect.to_samples

    def recording(batch, tokenizer=None):
        samples = real_to_samples(batch, tokenizer)
        trained.append(samples)
        return samples

    monkeypatch.setattr(collect, "to_samples", recording)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["rl", "run", str(_config(tmp_path, tiny_model)), "-o", str(out)])
    assert result.exit_code == 0, result.output

    assert len(trained) == 2
    sent = {(tuple(c.prompt_token_ids), tuple(c.completion_token_ids)): c for c in script.sent}
    decode = script.tokenizer.decode
    for samples in trained:
        # 2 examples x 2 rollouts, each search -> read -> answer: three assistant turns per rollout
        assert len(samples) == 12
        kinds = {"search": 0, "read": 0, "answer": 0}
        for sample in samples:
            reply = sent[
                (tuple(sample.prompt_ids), tuple(sample.completion_ids))
            ]  # exactly what the sampler saw and drew
            assert sample.sampler_logprobs == reply.logprobs and len(sample.sampler_logprobs) == len(
                sample.completion_ids
            )
            text = decode(sample.completion_ids)
            kind = (
                next(k for k in ("search", "read") if f'"name": "{k}"' in text) if "<tool_call>" in text else "answer"
            )
            kinds[kind] += 1
            if kind == "read":  # the turn after a tool call is prompted with the call and the tool's result
                prompt = decode(sample.prompt_ids)
                assert '"name": "search"' in prompt and '"doc_id": "doc-' in prompt
        assert kinds == {"search": 4, "read": 4, "answer": 4}

    run_dir = out / "rl" / "tools"
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "loss" in m]
    assert [m["step"] for m in steps] == [1, 2] and all(math.isfinite(m["loss"]) for m in steps)
    assert steps[0]["mismatch_kl"] < 1e-5  # step 1 trains the sampler's own weights: the ids line up
    rows = [json.loads(line) for line in (run_dir / "rollouts" / "step_1.jsonl").read_text().splitlines()]
    assert all(row["metrics"]["tool_calls"] == 2.0 and row["metrics"]["read_gold_doc"] in (0.0, 1.0) for row in rows)
    assert all(
        [m["role"] for m in row["completion"]] == ["assistant", "tool", "assistant", "tool", "assistant"]
        for row in rows
    )


@pytest.mark.slow
def test_baseline_and_evals_are_eval_run_dirs(tmp_path, tiny_model, monkeypatch):
    """The baseline and periodic evals go through the eval runner: same files and summary as `prime eval run`."""
    _scripted_rollouts(tiny_model, monkeypatch)
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["rl", "run", str(_config(tmp_path, tiny_model)), "-o", str(out), "--max-steps", "1"]
    )
    assert result.exit_code == 0, result.output
    run_dir = out / "rl" / "tools"
    baseline = json.loads((run_dir / "baseline.json").read_text())
    meta = json.loads((run_dir / "baseline" / "metadata.json").read_text())
    assert (
        meta["status"] == "complete" and meta["split"] == "train" and meta["num_rollouts"] == baseline["attempts"] == 4
    )
    assert meta["avg_reward"] == pytest.approx(baseline["mean_reward"], abs=1e-6)
    assert len((run_dir / "baseline" / "results.jsonl").read_text().splitlines()) == 4
    eval_meta = json.loads((run_dir / "evals" / "step_1" / "metadata.json").read_text())
    assert eval_meta["status"] == "complete" and eval_meta["split"] == "eval" and eval_meta["num_rollouts"] == 2
    eval_lines = [
        json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if "eval_reward" in line
    ]
    assert [{k: line[k] for k in ("step", "eval_reward")} for line in eval_lines] == [
        {"step": 1, "eval_reward": eval_meta["avg_reward"]}
    ]
    assert eval_lines[0]["eval/fact-search/all/agent/avg@1"] == eval_meta["avg_reward"]  # prime-rl's name beside ours


class _FakeEngine:
    """Stands in for the batching engine: records each request's seed, replies with a tool call."""

    def __init__(self):
        self.seeds: list[int | None] = []

    def encode_chat(self, messages, tools=None, template_kwargs=None):
        return [1, 2, 3] if tools else [1, 2]

    async def generate(self, prompt_ids, sampling):
        self.seeds.append(sampling.seed)
        text = _call("search", {"query": "x"})
        return GenerationResult(text, "stop", list(prompt_ids), [7, 8, 9], [-0.1, -0.2, -0.3])


def test_engine_source_client_returns_tool_calls_ids_logprobs_and_seeds_per_request():
    """The RL engine path is the embedded model's own client: tool calls parsed, ids and logprobs kept."""
    import asyncio

    from evalkit.clients.local import LocalClient

    engine = _FakeEngine()
    client = LocalClient("tiny", engine=engine, seed=5)  # what EngineSource builds over the trainer's engine
    tools = [{"type": "function", "function": {"name": "search", "parameters": {}}}]

    async def two():
        return [
            await client.chat([{"role": "user", "content": "q"}], SamplingArgs(logprobs=True), tools) for _ in range(2)
        ]

    first = asyncio.run(two())
    assert [c.tool_calls[0].name for c in first] == ["search", "search"] and first[0].finish_reason == "tool_calls"
    assert first[0].prompt_token_ids == [1, 2, 3] and first[0].completion_token_ids == [7, 8, 9]
    assert first[0].logprobs == [-0.1, -0.2, -0.3]
    client.reseed(5)
    asyncio.run(two())
    assert engine.seeds[:2] == engine.seeds[2:] and engine.seeds[0] != engine.seeds[1]  # reproducible, yet distinct
