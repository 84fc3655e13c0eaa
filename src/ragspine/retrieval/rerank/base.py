"""The reranker seam: the protocol, RESTRICTED withholding (R1, exit 1) and the chain (R55, R6).

A reranker reorders snippets and may add a ``rerank`` score; it raises when its model fails.
:class:`RerankChain` is what callers hold: it runs rerankers in order, each seeing the previous
order, and turns any failure into the previous order plus a reason on the result (R6). Every
reranker here sends a model only the open (non-RESTRICTED) snippets; RESTRICTED ones keep their
position, so no RESTRICTED text reaches a reranking model, local or remote.
"""

from __future__ import annotations

import logging
import math
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ragspine.errors import RagspineError
from ragspine.retrieval.link.snippet import Snippet
from ragspine.retrieval.sensitivity import is_restricted

log = logging.getLogger(__name__)


class RerankError(RagspineError):
    """A reranking model gave no usable answer; the chain keeps the previous order (R6)."""


@runtime_checkable
class Reranker(Protocol):
    @property
    def name(self) -> str: ...

    def rerank(self, query: str, results: Sequence[Snippet]) -> list[Snippet]: ...


def field_of(item: Any, name: str) -> Any:
    """A field of a snippet given as a mapping (the link's dicts) or as an object."""
    return item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)


def open_positions(items: Sequence[Any]) -> list[int]:
    """Positions of the items a model may see: every one that is not RESTRICTED (R1)."""
    return [i for i, item in enumerate(items) if not is_restricted(field_of(item, "sensitivity"))]


def place_open(items: Sequence[Any], positions: Sequence[int], order: Sequence[int]) -> list[Any]:
    """``items`` with the open ones (at ``positions``) rearranged so that the ``k``-th open slot
    holds open item ``order[k]``; everything else stays where it was."""
    placed = list(items)
    for position, chosen in zip(positions, order):
        placed[position] = items[positions[chosen]]
    return placed


class ScoringReranker(ABC):
    """A reranker that scores each open snippet among the first ``top_n`` and orders them by
    score (ties keep the previous order); the rest follow unchanged."""

    top_n: int | None = None
    reorder: bool = True

    @property
    @abstractmethod
    def name(self) -> str: ...

    @abstractmethod
    def score(self, query: str, results: Sequence[Snippet]) -> list[float]:
        """One score per snippet, higher is better; raises on failure."""

    def rerank(self, query: str, results: Sequence[Snippet]) -> list[Snippet]:
        items = list(results)
        head = items if self.top_n is None else items[: self.top_n]
        positions = open_positions(head)
        if not positions:
            return items
        scores = [float(s) for s in self.score(query, [head[i] for i in positions])]
        if len(scores) != len(positions) or not all(math.isfinite(s) for s in scores):
            raise RerankError(f"{self.name} gave {len(scores)} usable scores for {len(positions)}")
        scored = list(head)
        for position, value in zip(positions, scores):
            scored[position] = head[position].with_scores(rerank=value)
        if not self.reorder:
            return scored + items[len(head) :]
        order = sorted(range(len(positions)), key=lambda k: (-scores[k], k))
        return place_open(scored, positions, order) + items[len(head) :]


@dataclass(frozen=True)
class RerankOutcome:
    results: list[Snippet]
    degraded_reasons: tuple[str, ...] = ()


class RerankChain:
    """Rerankers applied in order (R55); never raises on a model failure (R6).

    A failing stage leaves the order it was given, adds ``"<name>: <why>"`` to the outcome and is
    logged once when it starts failing (and once when it recovers), not on every query.
    """

    def __init__(self, stages: Sequence[Reranker]) -> None:
        self.stages = tuple(stages)
        self._failing: set[int] = set()
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return ",".join(stage.name for stage in self.stages)

    def apply(self, query: str, results: Sequence[Snippet]) -> RerankOutcome:
        current = list(results)
        reasons: list[str] = []
        for number, stage in enumerate(self.stages):
            try:
                reranked = stage.rerank(query, current)
                _check_reordering(current, reranked)
            except Exception as exc:  # any model failure: keep the previous order (R6)
                reason = f"{stage.name}: {exc}"
                reasons.append(reason)
                self._note(number, reason)
                continue
            self._note(number, None)
            current = reranked
        return RerankOutcome(current, tuple(reasons))

    def rerank(self, query: str, results: Sequence[Snippet]) -> list[Snippet]:
        return self.apply(query, results).results

    def _note(self, number: int, failure: str | None) -> None:
        with self._lock:
            if failure is not None and number not in self._failing:
                self._failing.add(number)
                log.warning("reranker failed, keeping the previous order: %s", failure)
            elif failure is None and number in self._failing:
                self._failing.discard(number)
                log.info("reranker %s answers again", self.stages[number].name)


def _check_reordering(before: Sequence[Snippet], after: Sequence[Snippet]) -> None:
    """A stage may reorder, score and drop snippets, never invent or repeat one, and never move
    a RESTRICTED one (it saw none of them): each stays where it was, or moves up by as many
    places as snippets before it were dropped."""
    known = {s.chunk_id for s in before}
    ids = [s.chunk_id for s in after]
    if len(set(ids)) != len(ids) or not set(ids) <= known:
        raise RerankError("returned snippets it was not given")
    was = {s.chunk_id: i for i, s in enumerate(before)}
    dropped = [i for i, s in enumerate(before) if s.chunk_id not in set(ids)]
    for position, s in enumerate(after):
        if is_restricted(s.sensitivity):
            expected = was[s.chunk_id] - sum(1 for i in dropped if i < was[s.chunk_id])
            if position != expected:
                raise RerankError("moved a RESTRICTED snippet it must not have seen")
