"""Query transforms that ask a chat model (R41–R43): multi-query, HyDE, step-back, decomposition
and an adaptive complexity check.

Every prompt holds the user's question and nothing retrieved, so no chunk text — RESTRICTED or
not — can reach the model through a transform (R1). Each function raises the provider's error
or :class:`TransformError` for an unreadable answer; the pipeline turns either into a degraded
result in which the original query still runs (R6).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ragspine.llm import LLMError, LLMProvider, json_list

TRANSFORMS = ("multi_query", "rag_fusion", "hyde", "step_back")
MAX_SUB_QUESTIONS = 5
_OBJECT = re.compile(r"\{.*\}", re.DOTALL)
_COMPLEX_MARKERS = re.compile(
    r"\b(and|versus|vs\.?|compare[sd]?|comparison|difference|differences|between|both|each)\b"
    r"|和|与|以及|比较|对比|区别|分别|各自",
    re.IGNORECASE,
)


class TransformError(LLMError):
    """The model's answer could not be read as the transform asked."""


@dataclass(frozen=True)
class SubQuestion:
    question: str
    reasoning: str = ""


def _ask(provider: LLMProvider, instructions: str, question: str) -> str:
    messages = [
        {"role": "system", "content": instructions},
        {"role": "user", "content": f"Question: {question}"},
    ]
    return provider.chat(messages, temperature=0)


def _strings(values: Any, what: str) -> list[str]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise TransformError(f"{what}: expected a list of text, got {str(values)[:120]!r}")
    return [" ".join(v.split()) for v in values if v.strip()]


def multi_query(provider: LLMProvider, question: str, num_queries: int = 3) -> list[str]:
    """``num_queries`` queries: the question, then the model's rewrites of it."""
    if num_queries <= 1:
        return [question]
    answer = _ask(
        provider,
        f"Rewrite the question into {num_queries - 1} different search queries that would find "
        "the same information (other words, other angles). Reply with a JSON list of strings.",
        question,
    )
    rewrites = _strings(json_list(answer), "multi-query")
    return [question, *rewrites[: num_queries - 1]]


def hypothetical_document(provider: LLMProvider, question: str) -> str:
    """HyDE: a passage that would answer the question, used only as a retrieval probe — it is
    never returned or cited."""
    answer = _ask(
        provider,
        "Write a short passage (three to five sentences) that answers the question as an "
        "encyclopedia would. Reply with the passage only.",
        question,
    )
    passage = " ".join(answer.split())
    if not passage:
        raise TransformError("HyDE: the model wrote nothing")
    return passage


def step_back(provider: LLMProvider, question: str) -> str:
    """A more general question about the concept behind ``question``."""
    answer = " ".join(
        _ask(
            provider,
            "Rewrite the question as a more general step-back question about the concept or "
            "principle behind it. Reply with that one question only.",
            question,
        ).split()
    )
    if not answer:
        raise TransformError("step-back: the model wrote nothing")
    return answer


def decompose(
    provider: LLMProvider, question: str, max_sub_questions: int = MAX_SUB_QUESTIONS
) -> list[SubQuestion]:
    """At most ``max_sub_questions`` simpler questions that together answer ``question``."""
    answer = _ask(
        provider,
        f"Break the question into at most {max_sub_questions} simpler sub-questions that "
        'together answer it. Reply with JSON only: {"sub_questions": [{"question": "...", '
        '"reasoning": "why it is needed"}]}',
        question,
    )
    return parse_sub_questions(answer)[:max_sub_questions]


def parse_sub_questions(answer: str) -> list[SubQuestion]:
    """Sub-questions from an answer in the asked shape, or a bare list of objects or strings,
    possibly wrapped in prose or a code fence."""
    found: Any = None
    match = _OBJECT.search(answer) if isinstance(answer, str) else None
    if match:
        try:
            found = json.loads(match.group(0)).get("sub_questions")
        except (ValueError, AttributeError):
            found = None
    if found is None:
        found = json_list(answer)
    subs = []
    for item in found if isinstance(found, list) else []:
        if isinstance(item, str) and item.strip():
            subs.append(SubQuestion(" ".join(item.split())))
        elif isinstance(item, dict) and isinstance(item.get("question"), str):
            reasoning = item.get("reasoning")
            subs.append(
                SubQuestion(
                    " ".join(item["question"].split()),
                    reasoning if isinstance(reasoning, str) else "",
                )
            )
    if not subs:
        raise TransformError(f"decomposition: no sub-question in {str(answer)[:120]!r}")
    return subs


def is_complex(question: str) -> bool:
    """The deterministic complexity check behind adaptive routing (R43): several questions, or
    a comparison or conjunction between things, is worth decomposing."""
    marks = question.count("?") + question.count("？")
    return marks > 1 or bool(_COMPLEX_MARKERS.search(question))


def is_complex_by_model(provider: LLMProvider, question: str) -> bool:
    answer = _ask(
        provider,
        'Does answering the question need one lookup ("simple") or several separate lookups '
        '("complex")? Reply with one word: simple or complex.',
        question,
    ).lower()
    if "complex" in answer:
        return True
    if "simple" in answer:
        return False
    raise TransformError(f"adaptive: neither simple nor complex in {answer[:80]!r}")
