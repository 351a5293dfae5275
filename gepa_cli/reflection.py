"""The reflection (teacher) LM: a plain callable over the project's own model client.

Why not the library's default: gepa's proposer catches a failing reflection call, logs it and moves
on, and its output extractor takes the whole reply when there is no fenced block. A teacher that is
unreachable, replies empty, or ignores the format would then either burn the budget proposing
nothing or "optimize" the prompt into its chatter. Here each reply must hold a fenced block; a bad
reply is retried (with some temperature, since a greedy retry repeats itself) and after the last
attempt the run fails with :class:`ReflectionError`.

Retries after a reply without a block open the block themselves: the request ends with
``OPEN_BLOCK_SUFFIX`` and the reply is read as the block's body, up to its closing fence or the
reply's natural end. Small teachers (the embedded 135M model) rarely write fences on their own but
do continue one (an embedded teacher gets the opened block from its first request on). In that mode a body cut
off by ``max_tokens`` is kept (and logged): it is only a
proposal, scored on a minibatch and the validation set before it can replace anything.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gepa.strategies.instruction_proposal import InstructionProposalSignature

from evalkit.clients.base import ModelClient
from evalkit.core.aio import LoopThread
from evalkit.core.errors import ModelCallError
from evalkit.core.types import SamplingArgs

_CLOSED_BLOCK = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)
_OPEN_BLOCK = re.compile(r"```[^\n`]*\n(.*)\Z", re.DOTALL)
RETRY_TEMPERATURE = 0.7
OPEN_BLOCK_SUFFIX = "\n\nWrite only the new instruction, then close the block with ```.\n\n```\n"


class ReflectionError(Exception):
    """The teacher produced no usable proposal after every attempt; the run cannot honestly go on."""


def extract_continued_block(text: str, finished: bool = True) -> str | None:
    """The body of a block the request opened: a full block in the reply wins, else text up to ```."""
    block = extract_fenced_block(text, finished=False)
    if block is not None:
        return block
    if text.startswith("```"):  # the teacher opened a block of its own inside ours
        return extract_fenced_block(text, finished)
    if "```" in text:
        return text.split("```", 1)[0].strip() or None
    return text.strip() or None


def extract_fenced_block(text: str, finished: bool = True) -> str | None:
    """The first ```-fenced block's body; an unclosed block counts only if the reply ended on its own."""
    match = _CLOSED_BLOCK.search(text)
    if match:
        return match.group(1).strip() or None
    if finished:
        match = _OPEN_BLOCK.search(text)
        if match:
            return match.group(1).strip() or None
    return None


class ReflectionLM:
    """``propose(prompt) -> (new_text, raw_reply)`` with retries; counts every request it makes."""

    def __init__(
        self,
        client: ModelClient,
        loop: LoopThread,
        sampling: SamplingArgs,
        attempts: int = 3,
        on_request: Callable[[], None] | None = None,
        log: Callable[[str], None] | None = None,
        open_block_first: bool = False,
        on_usage: Callable[[Any], None] | None = None,
    ):
        self.on_usage = on_usage
        """Gets each reply's token usage (the reflection cost stopper's input)."""
        self.client = client
        self.loop = loop
        self.sampling = sampling
        self.attempts = attempts
        self.on_request = on_request
        self.log = log or (lambda _msg: None)
        self.open_block_first = open_block_first

    def propose(self, prompt: str, check: Callable[[str], str | None] | None = None) -> tuple[str, str]:
        """The new text from the teacher's fenced block; ``check`` (what is wrong with a text, or None)
        rejects a block the way a reply without one is rejected: the teacher is asked again."""
        problem = "no attempt made"
        opened = self.open_block_first
        for attempt in range(self.attempts):
            sampling = self.sampling
            if attempt > 0 and not self.sampling.temperature:
                sampling = self.sampling.merged({"temperature": RETRY_TEMPERATURE})
            opened = opened or problem.startswith("reply has no")
            request = prompt + OPEN_BLOCK_SUFFIX if opened else prompt
            extract = extract_continued_block if opened else extract_fenced_block
            if self.on_request is not None:
                self.on_request()
            try:
                completion = self.loop.run(self.client.chat([{"role": "user", "content": request}], sampling))
            except ModelCallError as exc:
                problem = f"request failed: {exc}"
            else:
                if self.on_usage is not None:
                    self.on_usage(completion.usage)
                text = (completion.text or "").strip()
                block = extract(text, finished=completion.finish_reason != "length") if text else None
                if not text:
                    problem = "empty reply"
                elif block is None:
                    cut = " (cut off by max_tokens)" if completion.finish_reason == "length" else ""
                    problem = f"reply has no ``` fenced block with the new prompt{cut}: {text[:120]!r}"
                elif check is not None and (wrong := check(block)) is not None:
                    problem = f"the proposed text is not usable: {wrong}"
                else:
                    if opened and completion.finish_reason == "length" and "```" not in text:
                        self.log(
                            f"reflection attempt {attempt + 1}: kept a proposal cut off by max_tokens "
                            f"({len(block)} chars)"
                        )
                    return block, text
            self.log(f"reflection attempt {attempt + 1}/{self.attempts} failed: {problem}")
        raise ReflectionError(
            f"reflection model '{self.client.model}' gave no usable proposal in {self.attempts} attempts "
            f"(last: {problem}); check that it is reachable and follows instructions, or pick a stronger -M"
        )


class Proposer:
    """gepa's ``custom_candidate_proposer``: new component texts from the teacher.

    The prompt is gepa's own instruction-proposal prompt (current text plus the reflective dataset);
    the request, retries and format rules are :class:`ReflectionLM`'s. The library catches a failing
    proposal, logs it and goes on, so a failure is kept in ``fatal`` and re-raised: the runner's
    ``FatalStopper`` reads ``fatal`` and ends the loop, and the run fails with that error. Once
    failed, later calls (the library retries a proposal) re-raise at once without asking again.
    """

    def __init__(self, reflection: ReflectionLM, template: str | None = None,
                 checks: Mapping[str, Callable[[str], str | None]] | None = None, hide: Callable[[str], str] = str):
        self.reflection = reflection
        self.hide = hide
        """What a proposal becomes before the library keeps it (:meth:`gepa_cli.secret_mask.SecretMask.hide`)."""
        self.checks = dict(checks or {})
        """Per component, what a proposed text must satisfy (:func:`gepa_cli.components.check_text`)."""
        self.template = template
        """gepa's instruction-proposal template to render instead of its default (``reflection_prompt_template``)."""
        self.fatal: BaseException | None = None

    def __call__(
        self,
        candidate: dict[str, str],
        reflective_dataset: Mapping[str, Sequence[Mapping[str, Any]]],
        components_to_update: list[str],
    ) -> dict[str, str]:
        if self.fatal is not None:
            raise self.fatal
        new_texts: dict[str, str] = {}
        for name in components_to_update:
            prompt = InstructionProposalSignature.prompt_renderer(
                {"current_instruction_doc": candidate[name], "dataset_with_feedback": list(reflective_dataset[name]),
                 "prompt_template": self.template}
            )
            if not isinstance(prompt, str):  # only image records render to a message list; ours are text
                raise TypeError("reflection prompt rendered to a message list; records must be text")
            try:
                text, _raw = self.reflection.propose(prompt, self.checks.get(name))
                new_texts[name] = self.hide(text)
            except Exception as exc:
                self.fatal = exc
                raise
        return new_texts
