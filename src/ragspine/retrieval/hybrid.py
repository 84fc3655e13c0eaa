"""Lexical and vector channels, run concurrently and fused (R25, R26, R29, R30).

Fusion is a convex combination of min-max normalised scores by default, RRF (k = 60) on request
(``RAGSPINE_FUSION=rrf``); the numbers chose the default. Two rules apply to both: BM25 abstains
on chunks in another script than the query (a Chinese query and an English passage share no
tokens, relevant or not), and a per-document ranking fuses documents, not chunks: BM25 scores
each document as a whole (``BM25Index.ranked_groups``) and the vector channel gives each
document its best chunk.

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
from ragspine.retrieval.lexical.tokenizer import SCRIPT_NEUTRAL, dominant_script
from ragspine.retrieval.masks import first_per_group
from ragspine.retrieval.vector.embedding_backends import EmbeddingError
from ragspine.retrieval.vector.index import VectorIndex

log = logging.getLogger(__name__)

FIRST_ROUND_MULT = 10
# How many first results a reranker reorders. The first round always fetches for at least this
# many, so the fused order of the first RERANK_DEPTH results does not depend on top_k: a search
# for 10 is the first 10 of a search for 30, and a reranker that fails leaves exactly the
# un-reranked order (R6).
RERANK_DEPTH = 30
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


FUSIONS = ("convex", "rrf")


Channel = list[tuple[int, float]]  # (slot, score), best first


def _impute_sum(
    contributions: list[dict[int, float]], abstaining: tuple[frozenset[int], ...]
) -> dict[int, float]:
    """Per slot, the sum of the channels' contributions (0 from a channel that did not return
    it); where channel ``i`` cannot judge a slot (``abstaining[i]``: another script), its share
    is the mean of the channels that can, so abstaining neither rewards nor punishes."""
    slots: set[int] = set().union(*contributions)
    fused: dict[int, float] = {}
    for slot in slots:
        votes = [
            contribution.get(slot, 0.0)
            for i, contribution in enumerate(contributions)
            if not (i < len(abstaining) and slot in abstaining[i])
        ]
        fused[slot] = sum(votes) * len(contributions) / len(votes) if votes else 0.0
    return fused


def rrf_fuse_slots(
    rankings: tuple[Channel, ...], k: int, abstaining: tuple[frozenset[int], ...] = ()
) -> dict[int, float]:
    """Reciprocal Rank Fusion (R22's rule)."""
    return _impute_sum(
        [{slot: 1.0 / (k + rank) for rank, (slot, _) in enumerate(r, 1)} for r in rankings],
        abstaining,
    )


def convex_fuse(
    rankings: tuple[Channel, ...], abstaining: tuple[frozenset[int], ...] = ()
) -> dict[int, float]:
    """Equal-weight mean of each channel's scores, min-max normalised over its own candidates.

    Unlike RRF it keeps how far apart the scores are, not only their order; it beat RRF on
    every shared dataset with both bundled models (see the README), and the weights are not
    tuned.
    """
    contributions: list[dict[int, float]] = []
    for ranking in rankings:
        scores = [score for _, score in ranking]
        low, high = (min(scores), max(scores)) if scores else (0.0, 0.0)
        span = high - low
        contributions.append(
            {slot: (score - low) / span if span > 0 else 1.0 for slot, score in ranking}
        )
    return {
        slot: total / len(rankings)
        for slot, total in _impute_sum(contributions, abstaining).items()
    }


def best_per_group(channels: tuple[Channel, ...], groups: IntArray) -> tuple[Channel, ...]:
    """Each channel cut to its best slot per group, every group named by one slot (the first
    channel's best where it has one), so fusion weighs documents, not chunks.

    Why: a document's best lexical chunk and its best semantic chunk are often different
    chunks; fused chunk by chunk, each would carry only half of the document's evidence.
    """
    reduced = [
        [ranking[i] for i in first_per_group([slot for slot, _ in ranking], groups)]
        for ranking in channels
    ]
    named: dict[int, int] = {}
    for ranking in reduced:
        for slot, _ in ranking:
            named.setdefault(int(groups[slot]), slot)
    return tuple([(named[int(groups[slot])], score) for slot, score in r] for r in reduced)


@dataclass(frozen=True)
class Ranking:
    """A ranked list of chunks in columns, cheap at any depth; position 0 is the best."""

    slots: list[int]
    chunk_ids: list[str]
    scores: dict[str, list[float | None]]  # stage name -> one score per position
    doc_ids: list[str] | None = None  # filled for per-document rankings
    degraded: str | None = None  # why a stage fell back, when one did
    generations: tuple[int, int] | None = None  # store generations the ranking's state lies in

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
        document_fusion: bool = True,
        script_abstention: bool = True,
    ) -> None:
        """``document_fusion`` and ``script_abstention`` switch off the two fusion rules (for
        ablations: ``bench/bench_fusion.py``)."""
        if fusion not in FUSIONS:
            raise ValueError(f"unknown fusion {fusion!r}; use one of {', '.join(FUSIONS)}")
        self.lexical = lexical
        self.vectors = vectors
        self.fusion = fusion
        self.document_fusion = document_fusion
        self.script_abstention = script_abstention
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
        depth = max(top_k, RERANK_DEPTH) * self.first_round_mult
        # the lexical index is always current; it also vetoes any stale vector
        live = self.lexical.live_mask(allowed)
        try:
            if channels == ("vector",):
                hits = self.vectors.search(query, depth if groups is not None else top_k, live)
                return self._fuse(query, [], hits, top_k, groups)
            if self._pool is None:
                self._pool = ThreadPoolExecutor(2, thread_name_prefix="ragspine-channel")
            vector_future = self._pool.submit(self.vectors.search, query, depth, live)
            if groups is not None and self.document_fusion:
                slots, bm25 = self.lexical.ranked_groups(query, depth, groups, allowed)
            else:
                slots, _, bm25 = self.lexical.ranked(query, depth, allowed)
            lexical = list(zip(slots, bm25))
            return self._fuse(query, lexical, vector_future.result(), top_k, groups)
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
        query: str,
        lexical: Channel,
        dense: Channel,
        top_k: int,
        groups: IntArray | None,
    ) -> Ranking:
        channels: tuple[Channel, ...] = (lexical, dense)
        if groups is not None and self.document_fusion:
            channels = best_per_group(channels, groups)
        bm25, vector = dict(channels[0]), dict(channels[1])
        if not (bm25 and vector):  # one channel found nothing (or did not run): the other ranks
            fused = rrf_fuse_slots((channels[0] or channels[1],), self.rrf_k)
        else:
            slots = set(bm25) | set(vector)
            abstaining = (self._other_script(query, slots),) if self.script_abstention else ()
            if self.fusion == "rrf":
                fused = rrf_fuse_slots(channels, self.rrf_k, abstaining)
            else:
                fused = convex_fuse(channels, abstaining)
        keys = self.lexical.keys
        order = sorted(fused, key=lambda s: (-fused[s], keys[s] or ""))
        if groups is not None and not self.document_fusion:
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

    def _other_script(self, query: str, slots: set[int]) -> frozenset[int]:
        """Slots written in another script than the query: BM25 cannot judge them (R25)."""
        wanted = dominant_script(query)
        if wanted == SCRIPT_NEUTRAL or not slots:
            return frozenset()
        candidates = sorted(slots)
        scripts = self.lexical.scripts(candidates)
        return frozenset(
            slot
            for slot, script in zip(candidates, scripts.tolist())
            if script not in (wanted, SCRIPT_NEUTRAL)
        )
