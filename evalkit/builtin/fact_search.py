"""Answer questions about fictional towns and people by searching a small generated corpus with tools.

Tools: ``search(query)`` returns up to five ``{doc_id, title}`` hits ranked by word overlap;
``read(doc_id)`` returns a document's text. Each question's answer is stated in exactly one document
(its id is in ``info.doc_id``). Everything is invented from ``seed``, so no model can know the answer
without reading, and no network or judge model is needed.

Reward: normalised exact match of the answer (``<answer>...</answer>`` if present, else the whole
final reply; case, punctuation and articles ignored). ``tool_calls`` and ``read_gold_doc`` are logged
with weight 0.

Env args: ``num_train_examples``, ``num_eval_examples``, ``seed``, ``num_docs`` (minimum corpus
size in entities), ``max_turns``.
"""

from __future__ import annotations

import math
import random
import re
import string
from typing import Any

from evalkit.builtin._util import check_counts
from evalkit.core.errors import UserError
from evalkit.envs import Parser, Rubric, ToolEnv

SYSTEM_PROMPT = (
    "Answer the question using the tools. Call search with a few keywords to find documents, then read "
    "the most relevant one. When you know the answer, reply with only <answer>your answer</answer>."
)

_SYLLABLES = "ka ven mor tal ri sel dan bor lin ae thu ros mer gal ith quen var osk pel dri ana hol zen cor".split()
_REGIONS = "Ardent Valley|Grey Marches|Sunder Coast|Hollow Hills|Amber Plains|Frost Reach|Tamsin Lowlands".split("|")
_TRADES = "glassworks|silk weaving|salt mines|clockmakers|honey farms|copper bells|paper mills|horse fairs".split("|")
_PROFESSIONS = "cartographer|astronomer|shipwright|botanist|composer|stonemason|physician|linguist".split("|")
_DEEDS = (
    "mapping the northern fjords|cataloguing comets|building the first ice-breaker|breeding frost-proof wheat|"
    "writing the Lantern Symphony|raising the Old Bridge|curing marsh fever|deciphering the river tablets"
).split("|")

_ANSWER_TAG = re.compile(r"<answer>\s*(.*?)\s*(?:</answer>|$)", re.DOTALL)
_ARTICLES = {"a", "an", "the"}


def extract_answer(text: str) -> str:
    found = _ANSWER_TAG.findall(text)
    return (found[-1] if found else text).strip()


def normalize(text: str) -> str:
    """Lowercase, punctuation and articles removed, whitespace collapsed (SQuAD-style)."""
    text = text.lower().translate(str.maketrans("", "", string.punctuation))
    return " ".join(word for word in text.split() if word not in _ARTICLES)


def _name(rng: random.Random, parts: int, used: set[str]) -> str:
    while True:
        name = "".join(rng.choice(_SYLLABLES) for _ in range(parts)).capitalize()
        if name not in used:
            used.add(name)
            return name


def build_corpus(num_entities: int, seed: int) -> tuple[dict[str, dict[str, str]], list[dict[str, Any]]]:
    """Documents by id and every question the corpus can answer (about three per document)."""
    rng = random.Random(seed)
    used: set[str] = set()
    docs: dict[str, dict[str, str]] = {}
    questions: list[dict[str, Any]] = []
    towns: list[str] = []
    for index in range(num_entities):
        doc_id = f"doc-{index:04d}"
        if index % 2 == 0 or not towns:
            town, river = _name(rng, 3, used), _name(rng, 2, used) + " River"
            year, trade, region = rng.randint(1100, 1899), rng.choice(_TRADES), rng.choice(_REGIONS)
            towns.append(town)
            text = (
                f"{town} is a town in the {region}. It was founded in {year} on the banks of the {river}. "
                f"{town} is known for its {trade}."
            )
            facts = [
                (f"In what year was the town of {town} founded?", str(year)),
                (f"Which river does the town of {town} lie on?", river),
                (f"What is the town of {town} known for?", trade),
            ]
            docs[doc_id] = {"title": town, "text": text}
        else:
            person = f"{_name(rng, 2, used)} {_name(rng, 2, used)}"
            born, birthplace = rng.randint(1500, 1950), rng.choice(towns)
            profession, deed = rng.choice(_PROFESSIONS), rng.choice(_DEEDS)
            text = f"{person} was a {profession} born in {birthplace} in {born}. {person} is remembered for {deed}."
            facts = [
                (f"What was the profession of {person}?", profession),
                (f"In what year was {person} born?", str(born)),
                (f"In which town was {person} born?", birthplace),
            ]
            docs[doc_id] = {"title": person, "text": text}
        for question, answer in facts:
            questions.append({"question": question, "answer": answer, "info": {"doc_id": doc_id}})
    return docs, questions


def make_tools(docs: dict[str, dict[str, str]]) -> list:
    """``search`` and ``read`` closed over one corpus (each environment instance has its own)."""
    index = {doc_id: set(re.findall(r"\w+", f"{d['title']} {d['text']}".lower())) for doc_id, d in docs.items()}
    counts: dict[str, int] = {}
    for terms in index.values():
        for term in terms:
            counts[term] = counts.get(term, 0) + 1
    # Rare words (names) outweigh common ones ("town", "born"), so a pasted question finds its document.
    idf = {term: math.log((1 + len(docs)) / count) for term, count in counts.items()}

    def search(query: str) -> list[dict[str, str]]:
        """Find documents about a town or person by keywords (best match first, at most five).

        Args:
            query: a few keywords, e.g. a name from the question.
        """
        words = set(re.findall(r"\w+", query.lower()))
        scored = [(sum(idf.get(w, 0.0) for w in words & terms), doc_id) for doc_id, terms in index.items()]
        hits = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))[:5]
        return [{"doc_id": doc_id, "title": docs[doc_id]["title"]} for _, doc_id in hits]

    def read(doc_id: str) -> str:
        """Read the full text of one document.

        Args:
            doc_id: an id returned by search, e.g. "doc-0001".
        """
        if doc_id not in docs:
            raise ValueError(f"no document {doc_id!r}; use a doc_id returned by search")
        return f"{docs[doc_id]['title']}\n{docs[doc_id]['text']}"

    return [search, read]


def exact_answer(completion, answer: str, parser: Parser) -> float:
    """1.0 when the normalised answer equals the normalised expected answer."""
    return float(normalize(parser.parse_answer(completion) or "") == normalize(answer))


def tool_calls(completion) -> float:
    """Logged only: how many tool calls the model made."""
    return float(sum(len(m.get("tool_calls") or []) for m in completion if m.get("role") == "assistant"))


def read_gold_doc(completion, info: dict) -> float:
    """Logged only: did the model read the document that holds the answer?"""
    wanted = info.get("doc_id")
    for message in completion:
        for call in message.get("tool_calls") or []:
            function = call.get("function", {})
            if function.get("name") == "read" and wanted and wanted in (function.get("arguments") or ""):
                return 1.0
    return 0.0


def load_environment(
    num_train_examples: int = 500,
    num_eval_examples: int = 100,
    seed: int = 0,
    num_docs: int = 60,
    max_turns: int = 6,
    system_prompt: str | None = None,
) -> ToolEnv:
    """Fact-search over one corpus; eval and train questions are disjoint (never the same question)."""
    check_counts(num_train_examples, num_eval_examples)
    if not isinstance(num_docs, int) or num_docs < 1:
        raise UserError(f"num_docs must be a positive integer, got {num_docs!r}")
    if not isinstance(max_turns, int) or max_turns < 2:
        raise UserError(f"max_turns must be an integer of at least 2 (search, then answer), got {max_turns!r}")
    entities = max(num_docs, math.ceil((num_train_examples + num_eval_examples) / 3))
    docs, questions = build_corpus(entities, seed)
    random.Random(seed + 1).shuffle(questions)
    evals = questions[:num_eval_examples]
    train = questions[num_eval_examples : num_eval_examples + num_train_examples]
    parser = Parser(extract_fn=extract_answer)
    rubric = Rubric(funcs=[exact_answer, tool_calls, read_gold_doc], weights=[1.0, 0.0, 0.0], parser=parser)
    env = ToolEnv(
        dataset=train or None,
        eval_dataset=evals or None,
        system_prompt=SYSTEM_PROMPT if system_prompt is None else system_prompt,
        parser=parser,
        rubric=rubric,
        tools=make_tools(docs),
        max_turns=max_turns,
        sampling_args={"max_tokens": 128},  # a default; -t and [sampling] override it
        env_id="fact-search",
    )
    env.corpus = docs
    return env
