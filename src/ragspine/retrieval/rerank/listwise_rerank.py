"""Listwise reranking by a judge (usually an LLM) that never sees RESTRICTED text (R50, R1).

The judge gets the query and the open candidates' texts, numbered, and answers with an order.
RESTRICTED candidates are withheld and keep their fused position; the open ones fill the other
positions in the judge's order. Any judge failure or unreadable answer leaves the open subset in
its fused order (R6): reranking can only improve the order, never break the search.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from ragspine.retrieval.sensitivity import is_restricted

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


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)


def build_listwise_prompt(query: str, candidates: Sequence[str]) -> list[dict[str, str]]:
    """Chat messages asking for an order of ``candidates`` (each cut to 1,200 characters)."""
    passages = "\n\n".join(
        f"[{i}] {' '.join(text.split())[:_MAX_PASSAGE_CHARS]}" for i, text in enumerate(candidates)
    )
    return [
        {"role": "system", "content": LISTWISE_INSTRUCTIONS},
        {"role": "user", "content": f"Query: {query}\n\nPassages:\n{passages}\n\nOrder:"},
    ]


def _permutation(indices: Sequence[int], n: int) -> list[int]:
    """A permutation of ``range(n)``: the indices that name a candidate, first mention wins,
    then every candidate not mentioned in its original order."""
    order: list[int] = []
    for index in indices:
        if 0 <= index < n and index not in order:
            order.append(index)
    return order + [i for i in range(n) if i not in order]


def parse_listwise_response(text: str, n: int) -> list[int]:
    """The order named by the numbers found in ``text`` (see :func:`_permutation`). Text with no
    usable number gives the identity order."""
    found = _INTEGER.findall(text) if isinstance(text, str) else []
    return _permutation([int(number) for number in found], n)


def listwise_rerank(
    query: str, results: Sequence[Item], judge: ListwiseJudge, *, top_n: int = 10
) -> list[Item]:
    """``results`` reordered: the open items among the first ``top_n`` in the judge's order,
    RESTRICTED items and everything after ``top_n`` where they were. Never raises."""
    items = list(results)
    head = items[: max(top_n, 0)]
    open_positions = [
        i for i, item in enumerate(head) if not is_restricted(_field(item, "sensitivity"))
    ]
    if len(open_positions) < 2:
        return items  # nothing to order, or only RESTRICTED text: the judge is not called
    candidates = [str(_field(head[i], "text") or "") for i in open_positions]
    try:
        raw = judge.judge(query, candidates)
        order = _permutation([int(i) for i in raw], len(candidates))
    except Exception as exc:  # a judge may fail in any way; the fused order stands (R6)
        log.warning("listwise judge failed, keeping the fused order: %s", exc)
        return items
    reordered = list(head)
    for position, chosen in zip(open_positions, order):
        reordered[position] = head[open_positions[chosen]]
    return reordered + items[len(head) :]
