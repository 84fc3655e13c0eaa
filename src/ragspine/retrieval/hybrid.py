"""Lexical and vector channels, run concurrently and fused (R25, R26, R29, R30).

Fusion is a convex combination of min-max normalised scores by default, RRF (k = 60) on request
(``RAGSPINE_FUSION=rrf``); the numbers chose the default.

The caller resolves filters and scope to a mask of allowed slots first, so both channels score
only survivors. Ties break by ``(-fused, chunk_id)`` (R3). A failing embedding model degrades to
the lexical ranking and says so (R6).
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ragspine.retrieval.lexical.fusion import DEFAULT_RRF_K
from ragspine.retrieval.lexical.index import BM25Index
from ragspine.retrieval.masks import first_per_group
from ragspine.retrieval.vector.embedding_backends import EmbeddingError
from ragspine.retrieval.vector.index import VectorIndex

log = logging.getLogger(__name__)

FIRST_ROUND_MULT = 10
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


FUSIONS = ("convex", "rrf")


def rrf_fuse_slots(rankings: tuple[list[tuple[int, float]], ...], k: int) -> dict[int, float]:
    """Reciprocal Rank Fusion over ranked ``(slot, score)`` lists (R22's rule)."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, (slot, _) in enumerate(ranking, start=1):
            fused[slot] = fused.get(slot, 0.0) + 1.0 / (k + rank)
    return fused


def convex_fuse(rankings: tuple[list[tuple[int, float]], ...]) -> dict[int, float]:
    """Equal-weight sum of each channel's scores, min-max normalised over its own candidates
    (a slot a channel did not return counts as that channel's minimum, 0).

    Unlike RRF it keeps how far apart the scores are, not only their order; it beat RRF on
    every shared dataset with both bundled models (see the README), and the weights are not
    tuned.
    """
    fused: dict[int, float] = {}
    for ranking in rankings:
        if not ranking:
            continue
        scores = [score for _, score in ranking]
        low, high = min(scores), max(scores)
        span = high - low
        for slot, score in ranking:
            share = (score - low) / span if span > 0 else 1.0
            fused[slot] = fused.get(slot, 0.0) + share / len(rankings)
    return fused


@dataclass(frozen=True)
class Ranking:
    """A ranked list of chunks in columns, cheap at any depth; position 0 is the best."""

    slots: list[int]
    chunk_ids: list[str]
    scores: dict[str, list[float | None]]  # stage name -> one score per position
    doc_ids: list[str] | None = None  # filled for per-document rankings
    degraded: str | None = None  # why a stage fell back, when one did

    def __len__(self) -> int:
        return len(self.slots)

    def scores_at(self, position: int) -> dict[str, float | None]:
        return {stage: values[position] for stage, values in self.scores.items()}


def empty_ranking() -> Ranking:
    return Ranking([], [], {"bm25": [], "vector": [], "fused": []})


class HybridRetriever:
    """BM25 + dense → RRF over one set of slots; ``vectors=None`` is pure BM25 + RRF."""

    def __init__(
        self,
        lexical: BM25Index,
        vectors: VectorIndex | None = None,
        *,
        rrf_k: int = DEFAULT_RRF_K,
        first_round_mult: int = FIRST_ROUND_MULT,
        fusion: str = "convex",
    ) -> None:
        if fusion not in FUSIONS:
            raise ValueError(f"unknown fusion {fusion!r}; use one of {', '.join(FUSIONS)}")
        self.lexical = lexical
        self.vectors = vectors
        self.fusion = fusion
        self.rrf_k = rrf_k
        self.first_round_mult = first_round_mult
        self._pool: ThreadPoolExecutor | None = None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    def search(
        self,
        query: str,
        top_k: int,
        *,
        channels: tuple[str, ...],
        allowed: BoolArray | None = None,
        groups: IntArray | None = None,
    ) -> Ranking:
        """``channels`` is ``("bm25",)``, ``("vector",)`` or ``("bm25", "vector")``."""
        if channels == ("bm25",):
            slots, keys, scores = self.lexical.ranked(query, top_k, allowed, groups)
            return self._single("bm25", slots, keys, scores)
        if self.vectors is None:
            raise ValueError("no vector channel is configured")
        depth = top_k * self.first_round_mult
        # the lexical index is always current; it also vetoes any stale vector
        live = self.lexical.live_mask(allowed)
        try:
            if channels == ("vector",):
                hits = self.vectors.search(query, depth if groups is not None else top_k, live)
                return self._fuse([], hits, top_k, groups)
            if self._pool is None:
                self._pool = ThreadPoolExecutor(2, thread_name_prefix="ragspine-channel")
            vector_future = self._pool.submit(self.vectors.search, query, depth, live)
            slots, _, bm25 = self.lexical.ranked(query, depth, allowed)
            return self._fuse(list(zip(slots, bm25)), vector_future.result(), top_k, groups)
        except EmbeddingError as exc:
            log.warning("vector channel failed, using BM25 alone: %s", exc)
            fallback = self.lexical.ranked(query, top_k, allowed, groups)
            return self._single("bm25", *fallback, degraded=f"vector channel failed: {exc}")

    def _single(
        self,
        stage: str,
        slots: list[int],
        keys: list[str],
        scores: list[float],
        degraded: str | None = None,
    ) -> Ranking:
        fused: list[float | None] = [1.0 / (self.rrf_k + r) for r in range(1, len(slots) + 1)]
        columns: dict[str, list[float | None]] = {"bm25": [None] * len(slots)}
        columns["vector"] = [None] * len(slots)
        columns[stage] = list(scores)
        columns["fused"] = fused
        return Ranking(slots, keys, columns, degraded=degraded)

    def _fuse(
        self,
        lexical: list[tuple[int, float]],
        dense: list[tuple[int, float]],
        top_k: int,
        groups: IntArray | None,
    ) -> Ranking:
        bm25 = dict(lexical)
        vector = dict(dense)
        if self.fusion == "rrf" or not lexical:
            fused = rrf_fuse_slots((lexical, dense), self.rrf_k)
        else:
            fused = convex_fuse((lexical, dense))
        keys = self.lexical.keys
        order = sorted(fused, key=lambda s: (-fused[s], keys[s] or ""))
        if groups is not None:
            order = [order[i] for i in first_per_group(order, groups)]
        order = order[:top_k]
        return Ranking(
            order,
            [keys[s] or "" for s in order],
            {
                "bm25": [bm25.get(s) for s in order],
                "vector": [vector.get(s) for s in order],
                "fused": [fused[s] for s in order],
            },
        )
