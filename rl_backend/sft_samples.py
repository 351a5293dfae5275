"""Chat dataset rows as training samples: the conversation through the model's chat template, the loss on the
assistant's tokens of the completion only.

A row is ``{"prompt": [messages], "completion": [messages], "tools": [...]}`` (`prime data from-eval`'s shape;
a plain string is one user / assistant message). The whole conversation is rendered once and tokenized with
character offsets; an assistant message's span is what rendering it adds after the conversation before it
plus the generation prompt (its text and its end-of-turn token). Tool results and other non-assistant
messages of the completion stay in the sequence, masked, as RL's interleaved samples mask environment tokens.
A template that rewrites earlier turns (the rendered prefix is not a prefix of the whole) is refused by row.

Messages reach the template as the in-process engine gives them to the model it serves
(:func:`evalkit.model.chat_format.render_messages`): text content (``null`` beside tool calls, as OpenAI-style
servers write it, is empty text; content parts are their text), tool calls as ``<tool_call>`` blocks, tool results
as ``<tool_response>`` blocks, the tools described in the system prompt. So an assistant turn that only calls a
tool trains on the call, the template never sees a ``None`` it would concatenate, and the trained model reads
the same text at eval and RL time. A row whose ``tools`` is not a list of tool schemas, or whose messages are not
chat messages, is refused in one line naming the row.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalkit.core.errors import UserError
from evalkit.model.chat_format import render_messages
from rl_backend.policy import Sample


def _messages(value: Any, role: str) -> Any:
    return [{"role": role, "content": value}] if isinstance(value, str) else value if value is not None else []


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The dataset's rows; a line that is not a JSON object with a prompt and a completion is refused by number."""
    return parse_rows(read_dataset(path), path)


def read_dataset(path: Path) -> str:
    """The dataset file's text (what :func:`parse_rows` reads); UserError when there is none."""
    if not path.is_file():
        raise UserError(f"dataset {path} not found; write one with `prime data from-eval RUN_DIR -o FILE`")
    return path.read_text(encoding="utf-8")


def parse_rows(text: str, path: Path) -> list[dict[str, Any]]:
    """The rows of a dataset's ``text`` (read from ``path``, which the errors name): :func:`read_rows`."""
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path} line {number} is not JSON ({exc.msg}); fix or remove it") from None
        if not isinstance(row, dict) or "prompt" not in row or "completion" not in row:
            raise UserError(f"{path} line {number} needs 'prompt' and 'completion' (chat messages or text)")
        rows.append(row)
    if not rows:
        raise UserError(f"{path} holds no rows")
    return rows


def _render(tokenizer: Any, messages: list[dict[str, Any]], tools: Any, generation_prompt: bool) -> str:
    return tokenizer.apply_chat_template(render_messages(messages, tools or None), tokenize=False,
                                         add_generation_prompt=generation_prompt)


def _check_row(prompt: Any, completion: Any, tools: Any, where: str) -> None:
    """One line for what the template could not render: ``tools`` that is not a list of tool schemas (objects),
    a message that is not an object with a string ``role``."""
    if tools is not None and (not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools)):
        raise UserError(f"{where}: 'tools' must be a list of tool schemas (JSON objects), got "
                        f"{type(tools).__name__}; fix the row or drop its 'tools'")
    for part, messages in (("prompt", prompt), ("completion", completion)):
        if not isinstance(messages, list):
            raise UserError(f"{where}: '{part}' must be a list of chat messages or a string, "
                            f"got {type(messages).__name__}")
        for message in messages:
            if not isinstance(message, dict) or not isinstance(message.get("role"), str):
                raise UserError(f"{where}: each message of '{part}' must be an object with a string 'role'")


def _trained_spans(
    tokenizer: Any, prompt: list[dict], completion: list[dict], tools: Any, where: str
) -> tuple[str, list[tuple[int, int]]]:
    """(the rendered conversation, character spans of the completion's assistant messages)."""
    whole = _render(tokenizer, prompt + completion, tools, False)
    spans = []
    for k, message in enumerate(completion):
        if message.get("role") != "assistant":
            continue
        before = _render(tokenizer, prompt + completion[:k], tools, True)
        upto = _render(tokenizer, prompt + completion[: k + 1], tools, False)
        if not upto.startswith(before) or not whole.startswith(upto):
            raise UserError(f"{where}: the chat template renders earlier turns differently once later ones follow "
                            "(e.g. it drops reasoning); SFT needs each assistant turn to extend the conversation")
        spans.append((len(before), len(upto)))
    if not spans:
        raise UserError(f"{where}: the completion has no assistant message to train on")
    return whole, spans


def to_sample(tokenizer: Any, row: dict[str, Any], where: str) -> Sample:
    """One row as a :class:`Sample`: prompt ids up to the first trained token, the rest with its loss mask."""
    prompt, completion = _messages(row["prompt"], "user"), _messages(row["completion"], "assistant")
    _check_row(prompt, completion, row.get("tools"), where)
    whole, spans = _trained_spans(tokenizer, prompt, completion, row.get("tools"), where)
    encoded = tokenizer(whole, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = encoded["input_ids"], encoded["offset_mapping"]
    trained = [any(lo <= start < hi for lo, hi in spans) for start, _ in offsets]
    if not any(trained) or trained[0]:
        raise UserError(f"{where}: the assistant's reply needs a prompt before it and at least one token of its own")
    first = trained.index(True)
    return Sample(prompt_ids=ids[:first], completion_ids=ids[first:], sampler_logprobs=[], advantage=0.0,
                  loss_mask=trained[first:])


def load_samples(path: Path, rows: list[dict[str, Any]], tokenizer: Any) -> list[Sample]:
    """``rows`` (read from ``path`` by :func:`read_rows`, before the model loads) as samples."""
    if not getattr(tokenizer, "is_fast", False):
        raise UserError(
            "SFT needs a fast tokenizer (character offsets mark the assistant's tokens); this model's is slow"
        )
    return [to_sample(tokenizer, row, f"{path} row {n}") for n, row in enumerate(rows, 1)]
