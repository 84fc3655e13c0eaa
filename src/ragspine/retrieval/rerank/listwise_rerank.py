"""Listwise reranking by a judge (usually an LLM) that never sees RESTRICTED text (R50, R1).

The judge gets the query and the open candidates' texts, numbered, and answers with an order.
RESTRICTED candidates are withheld and keep their fused position; the open ones fill the other
positions in the judge's order. Any judge failure or unreadable answer leaves the open subset in
its fused order (R6): reranking can only improve the order, never break the search.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from ragspine.llm import LLMProvider
from ragspine.retrieval.link.snippet import Snippet
from ragspine.retrieval.rerank.base import RerankError, field_of, open_positions, place_open

log = logging.getLogger(__name__)

Item = TypeVar("Item")
_INTEGER = re.compile(r"\d+")
_MAX_PASSAGE_CHARS = 1200

LISTWISE_INSTRUCTIONS = (
    "You rank passages by how well they answer a query. Reply with the passage numbers only, "
    "best first, as a JSON list such as [2, 0, 1]. Include every number once."
)


@runtime_checkable
class ListwiseJudge(Protocol):
    def judge(self, query: str, candidates: list[str]) -> list[int]: ...


def passages_prompt(instructions: str, query: str, texts: Sequence[str]) -> list[dict[str, str]]:
    """Chat messages giving a model the query and numbered passages (each cut to 1,200
    characters); every judge and grader here asks this way."""
    passages = "\n\n".join(
        f"[{i}] {' '.join(text.split())[:_MAX_PASSAGE_CHARS]}" for i, text in enumerate(texts)
    )
    return [
        {"role": "system", "content": instructions},
        {"role": "user", "content": f"Query: {query}\n\nPassages:\n{passages}\n\nAnswer:"},
    ]


def build_listwise_prompt(query: str, candidates: Sequence[str]) -> list[dict[str, str]]:
    """Chat messages asking for an order of ``candidates``."""
    return passages_prompt(LISTWISE_INSTRUCTIONS, query, candidates)


def _permutation(indices: Sequence[int], n: int) -> list[int]:
    """A permutation of ``range(n)``: the indices that name a candidate, first mention wins,
    then every candidate not mentioned in its original order."""
    order: list[int] = []
    for index in indices:
        if 0 <= index < n and index not in order:
            order.append(index)
    return order + [i for i in range(n) if i not in order]


def listwise_order(text: str, n: int) -> list[int]:
    """The order named by the numbers in ``text`` (see :func:`_permutation`); RerankError when
    no number names a candidate (an answer that is no order at all)."""
    found = [int(number) for number in _INTEGER.findall(text)] if isinstance(text, str) else []
    if not any(0 <= index < n for index in found):
        raise RerankError(f"the judge named no passage: {str(text)[:120]!r}")
    return _permutation(found, n)


def parse_listwise_response(text: str, n: int) -> list[int]:
    """Like :func:`listwise_order`, but text with no usable number gives the identity order."""
    try:
        return listwise_order(text, n)
    except RerankError:
        return list(range(n))


def _judged_order(query: str, head: Sequence[Any], judge: ListwiseJudge) -> list[Any] | None:
    """``head`` in the judge's order for its open items, or None when there is nothing to order
    (fewer than two open items: the judge is not called). Raises what the judge raises."""
    positions = open_positions(head)
    if len(positions) < 2:
        return None
    candidates = [str(field_of(head[i], "text") or "") for i in positions]
    order = _permutation([int(i) for i in judge.judge(query, candidates)], len(candidates))
    return place_open(head, positions, order)


def listwise_rerank(
    query: str, results: Sequence[Item], judge: ListwiseJudge, *, top_n: int = 10
) -> list[Item]:
    """``results`` reordered: the open items among the first ``top_n`` in the judge's order,
    RESTRICTED items and everything after ``top_n`` where they were. Never raises."""
    items = list(results)
    head = items[: max(top_n, 0)]
    try:
        reordered = _judged_order(query, head, judge)
    except Exception as exc:  # a judge may fail in any way; the fused order stands (R6)
        log.warning("listwise judge failed, keeping the fused order: %s", exc)
        return items
    return items if reordered is None else reordered + items[len(head) :]


class ListwiseReranker:
    """Listwise reranking as a chain stage: a judge failure is raised, so the chain can mark
    the result degraded (R6) instead of passing the fused order off as reranked."""

    name = "listwise"

    def __init__(self, judge: ListwiseJudge, *, top_n: int = 10) -> None:
        self.judge = judge
        self.top_n = top_n

    def rerank(self, query: str, results: Sequence[Snippet]) -> list[Snippet]:
        items = list(results)
        head = items[: self.top_n]
        reordered = _judged_order(query, head, self.judge)
        return items if reordered is None else reordered + items[len(head) :]


class ProviderListwiseJudge:
    """A :class:`ListwiseJudge` asking an :class:`LLMProvider` (R71). Provider errors and answers
    that name no passage propagate; ``listwise_rerank`` turns them into the fused order (R6)."""

    def __init__(self, provider: LLMProvider, **options: object) -> None:
        self.provider = provider
        self.options = {"temperature": 0, **options}

    def judge(self, query: str, candidates: list[str]) -> list[int]:
        answer = self.provider.chat(build_listwise_prompt(query, candidates), **self.options)
        return listwise_order(answer, len(candidates))
