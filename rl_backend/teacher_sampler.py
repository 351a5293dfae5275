"""``sft``'s teacher: the frozen model that samples an environment's training rollouts (``[algo.sampling.source]``).

Two kinds, as for ``opd``'s scoring teacher (:mod:`rl_backend.teacher`):

* an endpoint (``name, base_url, api_key_var``): the environment's chat requests go to its chat completions through
  the project's OpenAI-compatible client (:class:`~evalkit.clients.openai_client.OpenAIClient`), asking for vLLM's
  ``return_token_ids`` (a vLLM server and ``prime serve`` return them);
* a local model or checkpoint folder (``name`` without ``base_url``), served in this process by the embedded
  engine behind :class:`~evalkit.clients.local.LocalClient`.

The policy then trains with cross-entropy on the teacher's completion token ids after the teacher's prompt ids.
Those are the policy's own tokens only when the teacher renders a chat with the policy's tokenizer and chat
template, so :func:`check_sampler` asks the teacher for a short reply to a probe chat before any rollout and
compares its prompt ids with the policy's rendering; a teacher that returns no token ids, or other ones, is one
``error:`` line.
"""

from __future__ import annotations

from typing import Any

from evalkit.core.errors import ConfigError, ModelCallError
from evalkit.core.types import Completion, SamplingArgs
from rl_backend.algo_config import FrozenModelConfig
from rl_backend.teacher import PROBE

ENDPOINT_SAMPLING = SamplingArgs(logprobs=True, extra={"return_token_ids": True, "skip_special_tokens": False})
"""What every request to a teacher endpoint carries: the token ids of prompt and reply (vLLM's field)."""


class TeacherSampler:
    """A frozen model's client for an environment's rollouts, and the sampling settings its requests need."""

    def __init__(self, config: FrozenModelConfig, where: str, *, dtype: str = "auto", device: str = "cpu",
                 max_batch: int = 8):
        from evalkit.clients.factory import make_client
        from evalkit.clients.spec import ClientSpec

        self.config = config
        self.where = where
        self.engine: Any = None
        if config.base_url:
            self.client: Any = make_client(ClientSpec(model=config.name, base_url=config.base_url,
                                                      api_key_var=config.api_key_var, served=True))
            self.sampling = ENDPOINT_SAMPLING
            return
        from evalkit.model.engine import Engine

        try:
            self.engine = Engine.from_name(config.name, dtype=dtype, device=device, max_batch=max_batch)
        except Exception as exc:  # a folder that is not a model, a name not in the cache
            raise ConfigError(f"{where}.name '{config.name}' cannot be loaded as a local model "
                              f"({type(exc).__name__}: {exc}); give a model folder or a cached model, or set "
                              "base_url for an endpoint") from None
        self.client = make_client(ClientSpec(model=config.name, engine=self.engine))
        self.sampling = SamplingArgs(logprobs=True)

    def describe(self) -> str:
        where = f"at {self.config.base_url}" if self.config.base_url else "(local, served in-process)"
        return f"{self.where} '{self.config.name}' {where}"

    def reseed(self, seed: int) -> None:
        """Reproducible draws where the client can (the in-process engine); an endpoint samples as it seeds."""
        reseed = getattr(self.client, "reseed", None)
        if reseed is not None:
            reseed(seed)

    async def aclose(self) -> None:
        await self.client.aclose()

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()


async def probe(sampler: TeacherSampler) -> Completion:
    """The teacher's reply (two tokens) to a one-message chat holding :data:`rl_backend.teacher.PROBE`."""
    try:
        return await sampler.client.chat([{"role": "user", "content": PROBE}],
                                         sampler.sampling.merged({"max_tokens": 2, "temperature": 1.0}))
    except ModelCallError as exc:
        raise ConfigError(f"{sampler.describe()} does not answer a chat request ({exc}); start it (e.g. "
                          "`prime serve -m MODEL --port N`) or fix base_url") from None


def check_sampler(reply: Completion, sampler: TeacherSampler, tokenizer: Any) -> None:
    """Before any rollout: the teacher's reply to the probe chat carries token ids, and its prompt ids are the
    policy's rendering of the same chat (the same tokenizer and chat template). Each failure is a ConfigError."""
    from evalkit.model.chat_format import encode_chat

    if reply.prompt_token_ids is None or reply.completion_token_ids is None:
        raise ConfigError(f"{sampler.describe()} does not return the token ids of its replies (vLLM's "
                          "return_token_ids); sft trains on the teacher's tokens: serve the teacher with vLLM or "
                          "`prime serve`")
    theirs = [int(t) for t in reply.prompt_token_ids]
    ours = encode_chat(tokenizer, [{"role": "user", "content": PROBE}])
    if theirs == ours:
        return
    at = next((i for i, (a, b) in enumerate(zip(theirs, ours)) if a != b), min(len(theirs), len(ours)))
    there = f"id {theirs[at]}" if at < len(theirs) else "nothing"
    here = f"id {ours[at]} {tokenizer.decode([ours[at]])!r}" if at < len(ours) else "nothing"
    raise ConfigError(f"{sampler.describe()} has another tokenizer or chat template than the policy (the probe chat's "
                      f"prompt differs at token {at}: {there} there, {here} here); sft trains the policy on the "
                      "teacher's token ids, so use a teacher of the same tokenizer family and chat template")
