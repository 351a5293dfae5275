"""The embedded engine as a :class:`~evalkit.clients.base.ModelClient` (``local/...``, Hub ids, folders).

The client is cheap: it resolves the model name at construction (so a typo is a UserError before
any rollout) and loads the shared engine (:func:`evalkit.model.shared.get_engine`) on the first
call. Every client of the same model, dtype and device in a process talks to the same engine, so
concurrent rollouts from eval, GEPA and RL land in the same batches.

Completions always carry prompt/completion token ids and per-token logprobs. A request the engine
refuses (prompt beyond the context window, ``max_tokens`` < 1) raises ModelCallError and costs the
other requests nothing.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from evalkit.core.defaults import DEFAULT_MODEL
from evalkit.core.errors import ModelCallError, UserError
from evalkit.core.types import Completion, Message, SamplingArgs, Usage
from evalkit.model.chat_format import parse_tool_calls
from evalkit.model.devices import check_device
from evalkit.model.registry import GgufModel, resolve_model

if TYPE_CHECKING:
    from evalkit.model.engine import Engine
    from evalkit.model.requests import GenerationResult


class LocalClient:
    """In-process client over the batching engine."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        dtype: str | None = None,
        max_batch: int | None = None,
        device: str | None = None,
        engine: Engine | None = None,
        seed: int | None = None,
    ):
        self.model = model
        self.base_url: str | None = None
        self._dtype = dtype
        self._max_batch = max_batch
        self._device = check_device(device)
        self._engine = engine
        self._seed, self._count = seed, 0
        if engine is None:
            source = resolve_model(model)
            base = source if isinstance(source, GgufModel) else source.base if source.path is None else None
            if base is not None and not base.converted_dir().joinpath("model.safetensors").is_file():
                base.require_gguf()  # the pip hint now, not at the first rollout

    @property
    def engine(self) -> Engine:
        """The shared engine, loaded on first use (the RL trainer takes ``.model``/``.tokenizer`` from it)."""
        if self._engine is None:
            from evalkit.model.shared import get_engine

            self._engine = get_engine(self.model, dtype=self._dtype, max_batch=self._max_batch, device=self._device)
        return self._engine

    def reseed(self, seed: int) -> None:
        """Seed the requests that follow: the n-th one without a seed of its own gets one derived from
        ``seed`` and ``n``, so a batch of rollouts is reproducible (RL resume) yet every request draws
        differently. Without ``seed``/``reseed`` unseeded requests draw fresh randomness."""
        self._seed, self._count = seed, 0

    async def load(self) -> None:
        """Load the engine now, off the event loop (otherwise the first ``chat`` does it)."""
        if self._engine is None:
            await asyncio.to_thread(lambda: self.engine)

    async def chat(
        self, messages: list[Message], sampling: SamplingArgs, tools: list[dict[str, Any]] | None = None
    ) -> Completion:
        from evalkit.model.engine import EngineError
        from evalkit.model.requests import InvalidRequest

        if self._engine is None:
            await self.load()
        engine = self.engine
        if self._seed is not None and sampling.seed is None:
            sampling = sampling.merged({"seed": self._seed * 100_003 + self._count})
            self._count += 1
        try:
            prompt_ids = engine.encode_chat(messages, tools, template_kwargs(sampling))
            result = await engine.generate(prompt_ids, sampling)
        except InvalidRequest as exc:
            raise ModelCallError(f"{self.model}: invalid request: {exc}", retryable=False, status=400) from None
        except EngineError as exc:
            raise ModelCallError(f"{self.model}: {exc}", retryable=False) from None
        except UserError:
            raise
        except Exception as exc:  # e.g. a chat template that rejects the messages
            raise ModelCallError(f"{self.model}: {type(exc).__name__}: {exc}", retryable=False) from None
        return to_completion(result, tools_given=bool(tools))

    async def aclose(self) -> None:
        """Nothing to release: the engine is shared by the process (see ``shutdown_engines``)."""
        return None


def template_kwargs(sampling: SamplingArgs) -> dict[str, Any]:
    """Chat-template variables a request carries: ``chat_template_kwargs`` (vLLM's body key) and
    ``reasoning_effort`` (OpenAI's), which an in-process model can only honour through its template."""
    out = dict(sampling.extra.get("chat_template_kwargs") or {})
    if sampling.extra.get("reasoning_effort") is not None:
        out.setdefault("reasoning_effort", sampling.extra["reasoning_effort"])
    return out


def to_completion(result: GenerationResult, *, tools_given: bool) -> Completion:
    """A client-facing Completion from an engine result (tool-call blocks parsed when tools were offered)."""
    text, calls = parse_tool_calls(result.text) if tools_given else (result.text, [])
    return Completion(
        text=text,
        tool_calls=calls,
        finish_reason="tool_calls" if calls else result.finish_reason,
        usage=Usage(input_tokens=len(result.prompt_ids), output_tokens=len(result.token_ids)),
        prompt_token_ids=list(result.prompt_ids),
        completion_token_ids=list(result.token_ids),
        logprobs=list(result.logprobs),
    )
