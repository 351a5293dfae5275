"""A frozen teacher that scores the policy's sampled tokens: ``opd``'s reference log-probabilities.

Two kinds, one interface (:meth:`score`: the teacher's log-probability of each completion token after the
prompt and the completion tokens before it):

* an endpoint (``[algo.teacher] name, base_url, api_key_var``): ``POST {base_url}/completions`` with the token ids
  as the prompt, ``max_tokens = 1`` and vLLM's ``prompt_logprobs``, read from ``choices[0].prompt_logprobs``
  (a vLLM server, or ``prime serve``, answers it);
* a local model or checkpoint folder (``name`` without ``base_url``), loaded once and scored in-process with the
  trainer's own forward (:func:`evalkit.model.scoring.score_tokens`).

:func:`check_teacher` runs before any rollout and turns each way a teacher cannot serve into one ``error:`` line:
it does not answer, it cannot score given tokens (a server that ignores ``prompt_logprobs``), it has another
tokenizer (token ids out of its vocabulary, or decoded to other text), or it is the policy itself.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from evalkit.core.errors import ConfigError
from rl_backend.algo_config import FrozenModelConfig

PROBE = "The quick brown fox jumps over the lazy dog. 12 + 30 = 42; ok?"
"""The text whose tokens :func:`check_teacher` asks the teacher to score (ASCII: decodes the same everywhere)."""
TIMEOUT_S = 120.0
SAME_MODEL_TOLERANCE = 1e-4
"""Largest log-probability difference on the probe at which the teacher counts as the policy itself."""


class TeacherError(Exception):
    """The teacher could not score a request (the message says why, for one ``error:`` line)."""


class EndpointTeacher:
    """A teacher behind an OpenAI-compatible endpoint that answers vLLM's ``prompt_logprobs``."""

    def __init__(self, config: FrozenModelConfig, where: str = "algo.teacher", concurrency: int = 8):
        import httpx

        self.config = config
        self.where = where
        self.url = config.base_url.rstrip("/") + "/completions"
        headers = {}
        if config.api_key_var:
            key = os.environ.get(config.api_key_var)
            if not key:
                raise ConfigError(f"{where}.api_key_var names {config.api_key_var}, which is not set; export it "
                                  "(or load it with --env-file)")
            headers["Authorization"] = f"Bearer {key}"
        self.http = httpx.Client(timeout=TIMEOUT_S, headers=headers)
        self.pool = ThreadPoolExecutor(concurrency, thread_name_prefix="teacher")

    def describe(self) -> str:
        return f"{self.where} '{self.config.name}' at {self.config.base_url}"

    def prompt_logprobs(self, token_ids: list[int]) -> tuple[list[float | None], list[str | None]]:
        """Each token's log-probability (``None`` for the first) and the teacher's text of it."""
        import httpx

        from evalkit.clients.wire import given_logprobs

        body = {"model": self.config.name, "prompt": token_ids, "max_tokens": 1, "prompt_logprobs": 0,
                "temperature": 1.0}
        try:
            reply = self.http.post(self.url, json=body)
        except httpx.HTTPError as exc:
            raise TeacherError(f"{self.describe()} does not answer ({type(exc).__name__}: {exc}); start it (e.g. "
                               "`prime serve -m MODEL --port N`) or fix base_url") from None
        if reply.status_code != 200:
            text = _error_text(reply)
            hint = ("; it may have another tokenizer than the policy (fewer token ids)"
                    if reply.status_code == 400 and "token ids" in text else "")
            raise TeacherError(f"{self.describe()} answered HTTP {reply.status_code} to a scoring request: "
                               f"{text}{hint}")
        try:
            entries = reply.json()["choices"][0].get("prompt_logprobs")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise TeacherError(f"{self.describe()} answered a scoring request with something that is not a "
                               "completions reply") from None
        if entries is None:
            raise TeacherError(f"{self.describe()} cannot score given tokens: its reply has no prompt_logprobs "
                               "(vLLM's field); serve the teacher with vLLM or `prime serve`")
        try:
            values = given_logprobs(entries, token_ids)
        except ValueError as exc:
            raise TeacherError(f"{self.describe()} answered prompt_logprobs that do not fit the tokens sent: {exc}; "
                               "it may have another tokenizer than the policy") from None
        texts = [(entry or {}).get(str(token), {}).get("decoded_token") for entry, token in zip(entries, token_ids)]
        return values, texts

    def score(self, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
        values, _ = self.prompt_logprobs([*prompt_ids, *completion_ids])
        return [float(v) for v in values[len(prompt_ids):]]

    def score_many(self, pairs: list[tuple[list[int], list[int]]]) -> list[list[float]]:
        """:meth:`score` of each ``(prompt_ids, completion_ids)``, several requests in flight."""
        return list(self.pool.map(lambda pair: self.score(*pair), pairs))

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.http.close()


class LocalTeacher:
    """A teacher loaded from a model name or checkpoint folder and scored in this process (float32, CPU)."""

    def __init__(self, config: FrozenModelConfig, where: str = "algo.teacher"):
        from rl_backend.model_io import load_model_and_tokenizer

        self.config = config
        self.where = where
        try:
            model, self.tokenizer = load_model_and_tokenizer(config.name, dtype="float32", device="cpu")
        except Exception as exc:  # a folder that is not a model, a name not in the cache
            raise ConfigError(f"{where}.name '{config.name}' cannot be loaded as a local model "
                              f"({type(exc).__name__}: {exc}); give a model folder or a cached model, or set "
                              "base_url for an endpoint") from None
        self.model = model.eval().requires_grad_(False)
        self.lock = threading.Lock()

    def describe(self) -> str:
        return f"{self.where} '{self.config.name}' (local)"

    def prompt_logprobs(self, token_ids: list[int]) -> tuple[list[float | None], list[str | None]]:
        from evalkit.model.scoring import score_tokens

        size = self.model.get_input_embeddings().num_embeddings
        if any(t >= size for t in token_ids):
            raise TeacherError(f"{self.describe()} has {size} token ids, fewer than the policy's tokens need: "
                               "it has another tokenizer")
        with self.lock:
            scores = score_tokens(self.model, token_ids)
        texts = [self.tokenizer.decode([t]) for t in token_ids]
        return [s.logprob if s is not None else None for s in scores], texts

    def score(self, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
        values, _ = self.prompt_logprobs([*prompt_ids, *completion_ids])
        return [float(v) for v in values[len(prompt_ids):]]

    def score_many(self, pairs: list[tuple[list[int], list[int]]]) -> list[list[float]]:
        return [self.score(*pair) for pair in pairs]

    def close(self) -> None:
        pass


def make_teacher(config: FrozenModelConfig, where: str = "algo.teacher") -> EndpointTeacher | LocalTeacher:
    return EndpointTeacher(config, where) if config.base_url else LocalTeacher(config, where)


def check_teacher(teacher: EndpointTeacher | LocalTeacher, tokenizer: Any, policy_model: Any) -> None:
    """Before any rollout: the teacher scores :data:`PROBE` as the policy tokenizes it, decodes each token to the
    policy's text of it, and is not the policy itself. Each failure is a :class:`ConfigError`."""
    from evalkit.model.scoring import score_tokens

    ids = [int(t) for t in tokenizer.encode(PROBE, add_special_tokens=False)]
    try:
        values, texts = teacher.prompt_logprobs(ids)
    except TeacherError as exc:
        raise ConfigError(str(exc)) from None
    decoded = [(text, tokenizer.decode([token])) for text, token in zip(texts, ids) if isinstance(text, str)]
    differ = [pair for pair in decoded if pair[0] != pair[1]]
    if decoded and len(differ) * 2 > len(decoded):
        theirs, ours = differ[0]
        raise ConfigError(f"{teacher.describe()} has another tokenizer than the policy (a probe token reads "
                          f"{theirs!r} there, {ours!r} here); distillation scores the policy's own token ids, so "
                          "use a teacher of the same tokenizer family")
    training = policy_model.training
    policy_model.eval()  # no dropout in the comparison
    try:
        own = [s.logprob if s is not None else None for s in score_tokens(policy_model, ids)]
    finally:
        policy_model.train(training)
    gaps = [abs(a - b) for a, b in zip(values, own) if a is not None and b is not None]
    if gaps and max(gaps) < SAME_MODEL_TOLERANCE:
        raise ConfigError(f"{teacher.describe()} gives the policy's own log-probabilities: it is the policy itself, "
                          "and distilling toward itself has no signal; name a stronger model as the teacher")


def _error_text(reply: Any) -> str:
    try:
        data = reply.json()
        message = data.get("error", {}).get("message") if isinstance(data, dict) else None
    except ValueError:
        message = None
    return str(message or reply.text[:200] or reply.reason_phrase)
