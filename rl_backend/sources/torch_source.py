"""The in-process rollout source: a batching sampler over a torch copy of the policy.

Concurrent ``chat`` calls from many rollouts are queued and decoded together: one batched forward
per token (left-padded prompts, KV cache, finished rows dropped from the batch). The sampler keeps
its own copy of the model with LoRA *merged* into the base weights, so decoding pays no adapter
cost and the trainer can keep training while this copy generates the next step (one-step
off-policy). ``sync`` copies the trainer's weights in (LoRA: base + delta, computed per module).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from evalkit.clients.local import to_completion
from evalkit.errors import ModelCallError
from evalkit.model.requests import GenerationResult
from evalkit.types import Completion, Message, SamplingArgs


GREEDY_BELOW = 1e-4
"""Temperatures at or below this decode greedily (evaluation); training needs a positive temperature."""


@dataclass
class _Request:
    prompt_ids: list[int]
    max_tokens: int
    temperature: float
    top_p: float
    future: asyncio.Future = field(repr=False)


class TorchSampler:
    """Batched ancestral sampling that returns each sampled token's log-probability."""

    def __init__(self, model: Any, tokenizer: Any, seed: int = 0, max_batch_size: int = 64):
        import torch

        self.model = model
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.generator = torch.Generator(device="cpu").manual_seed(seed)
        eos = {tokenizer.eos_token_id}
        for token in ("<|im_end|>", "<|endoftext|>"):
            token_id = tokenizer.convert_tokens_to_ids(token)
            if isinstance(token_id, int) and token_id != tokenizer.unk_token_id:
                eos.add(token_id)
        self.eos_ids = {t for t in eos if t is not None}
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(self.eos_ids)
        self.generated_tokens = 0

    def reseed(self, seed: int) -> None:
        self.generator.manual_seed(seed)

    def encode_chat(self, messages: list[Message], tools: list[dict[str, Any]] | None = None) -> list[int]:
        """The engine's prompt rendering (tools described in the system prompt), so tool calls read alike."""
        from evalkit.model.chat_format import render_messages

        text = self.tokenizer.apply_chat_template(render_messages(messages, tools), tokenize=False, add_generation_prompt=True)
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def generate(
        self, prompts: list[list[int]], max_tokens: int, temperature: float, top_p: float = 1.0
    ) -> list[tuple[list[int], list[float], str]]:
        """For each prompt: (completion ids, logprobs, finish reason ``stop``/``length``)."""
        import torch

        device = next(self.model.parameters()).device
        batch = len(prompts)
        width = max(len(p) for p in prompts)
        input_ids = torch.full((batch, width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((batch, width), dtype=torch.long)
        for row, prompt in enumerate(prompts):
            input_ids[row, width - len(prompt) :] = torch.tensor(prompt, dtype=torch.long)
            attention[row, width - len(prompt) :] = 1
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        input_ids, attention, positions = input_ids.to(device), attention.to(device), positions.to(device)
        tokens: list[list[int]] = [[] for _ in prompts]
        logprobs: list[list[float]] = [[] for _ in prompts]
        finish = ["length"] * batch
        alive = list(range(batch))  # original row of each live batch row
        with torch.inference_mode():
            out = self.model(input_ids=input_ids, attention_mask=attention, position_ids=positions, use_cache=True, logits_to_keep=1)
            cache = out.past_key_values
            next_pos = positions[:, -1] + 1
            for _ in range(max_tokens):
                logits = out.logits[:, -1, :].float()
                if temperature <= GREEDY_BELOW:
                    sampled = logits.argmax(-1).cpu()
                    chosen = torch.zeros(len(alive))  # greedy: the sampler's distribution is a point mass
                else:
                    logp = torch.log_softmax(logits / temperature, dim=-1)
                    if top_p < 1.0:
                        logp = _nucleus(logp, top_p)
                    sampled = torch.multinomial(logp.exp().cpu(), 1, generator=self.generator).squeeze(1)
                    chosen = logp.cpu().gather(1, sampled[:, None]).squeeze(1)
                keep = []
                for i, row in enumerate(alive):
                    token = int(sampled[i])
                    tokens[row].append(token)
                    logprobs[row].append(float(chosen[i]))
                    if token in self.eos_ids:
                        finish[row] = "stop"
                    else:
                        keep.append(i)
                self.generated_tokens += len(alive)
                if not keep or len(tokens[alive[keep[0]]]) >= max_tokens:
                    break
                if len(keep) < len(alive):
                    index = torch.tensor(keep, dtype=torch.long, device=device)
                    cache.batch_select_indices(index)
                    attention, next_pos, sampled = attention[index], next_pos[index], sampled[keep]
                    alive = [alive[i] for i in keep]
                attention = torch.cat([attention, torch.ones((len(alive), 1), dtype=attention.dtype, device=device)], dim=1)
                out = self.model(
                    input_ids=sampled[:, None].to(device),
                    attention_mask=attention,
                    position_ids=next_pos[:, None],
                    past_key_values=cache,
                    use_cache=True,
                    logits_to_keep=1,
                )
                next_pos = next_pos + 1
        return [(tokens[i], logprobs[i], finish[i]) for i in range(batch)]


def _nucleus(logp: Any, top_p: float) -> Any:
    """Restrict to the smallest set of tokens with mass >= top_p and renormalise (log space)."""
    import torch

    sorted_logp, order = torch.sort(logp, descending=True, dim=-1)
    cumulative = sorted_logp.exp().cumsum(-1)
    drop_sorted = cumulative - sorted_logp.exp() >= top_p
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    logp = logp.masked_fill(drop, float("-inf"))
    return torch.log_softmax(logp, dim=-1)


class TorchClient:
    """A :class:`~evalkit.clients.base.ModelClient` over a :class:`TorchSampler`.

    Requests that arrive together (all rollouts of a step are launched at once) are decoded in one
    batch of up to ``max_batch_size``. Decoding runs on the event loop's thread: nothing else in the
    loop could progress without the model anyway, and it keeps the sampler single-threaded.
    """

    def __init__(self, sampler: TorchSampler, model_name: str):
        self.sampler = sampler
        self.model = model_name
        self.base_url: str | None = None
        self._pending: list[_Request] = []
        self._flushing: asyncio.Task | None = None
        """The batching task of the event loop the requests come from (the run's one loop)."""

    async def chat(self, messages: list[Message], sampling: SamplingArgs, tools: list[dict[str, Any]] | None = None) -> Completion:
        prompt_ids = self.sampler.encode_chat(messages, tools)
        loop = asyncio.get_running_loop()
        request = _Request(
            prompt_ids=prompt_ids,
            max_tokens=int(sampling.max_tokens or 256),
            temperature=float(sampling.temperature if sampling.temperature is not None else 1.0),
            top_p=float(sampling.top_p if sampling.top_p is not None else 1.0),
            future=loop.create_future(),
        )
        self._pending.append(request)
        task = self._flushing
        if task is None or task.done() or task.get_loop() is not loop:
            self._flushing = loop.create_task(self._flush())
        completion_ids, logprobs, finish = await request.future
        text = self.sampler.tokenizer.decode(
            [t for t in completion_ids if t not in self.sampler.eos_ids], skip_special_tokens=True
        )
        result = GenerationResult(text, finish, prompt_ids, completion_ids, logprobs)
        return to_completion(result, tools_given=bool(tools))  # the embedded client's tool-call parsing

    async def _flush(self) -> None:
        for _ in range(3):  # let every rollout launched in the same tick enqueue first
            await asyncio.sleep(0)
        while self._pending:
            self._pending = [r for r in self._pending if not r.future.done()]  # cancelled callers
            if not self._pending:
                break
            # one batch shares sampling settings; group by them, oldest first
            head = self._pending[0]
            key = (head.max_tokens, head.temperature, head.top_p)
            batch = [r for r in self._pending if (r.max_tokens, r.temperature, r.top_p) == key][: self.sampler.max_batch_size]
            taken = {id(r) for r in batch}
            self._pending = [r for r in self._pending if id(r) not in taken]
            try:
                results = self.sampler.generate([r.prompt_ids for r in batch], *key)
            except Exception as exc:  # a broken forward is a failed model call, recorded per rollout
                for request in batch:
                    if not request.future.done():
                        request.future.set_exception(ModelCallError(f"torch sampler failed: {type(exc).__name__}: {exc}"))
                continue
            for request, result in zip(batch, results):
                if not request.future.done():
                    request.future.set_result(result)
            await asyncio.sleep(0)

    async def aclose(self) -> None:
        return None


class TorchSource:
    """Rollouts from an in-process sampler whose weights follow the trainer's."""

    name = "torch"

    def __init__(self, policy: Any, model_name: str, seed: int, max_batch_size: int):
        base = policy.merged_copy()
        self.sampler = TorchSampler(base, policy.tokenizer, seed=seed, max_batch_size=max_batch_size)
        self.client = TorchClient(self.sampler, model_name)
        self.sampling = SamplingArgs(logprobs=True)
        self.synced_step = 0
        self.sync_seconds = 0.0

    @property
    def model(self) -> Any:
        """The sampler's model: the trainer's weights with LoRA merged (what ``weights/`` exports)."""
        return self.sampler.model

    def sync(self, policy: Any, step: int) -> None:
        started = time.perf_counter()
        policy.copy_merged_into(self.sampler.model)
        self.synced_step = step
        self.sync_seconds = time.perf_counter() - started

    def reseed(self, seed: int) -> None:
        self.sampler.reseed(seed)

    def export_model(self) -> Any:
        """The merged model to write to ``weights/step_N`` (valid only at a sync point)."""
        return self.sampler.model

    def close(self) -> None:
        return None
