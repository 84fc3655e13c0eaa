"""Rescoring the head of a ranking with a second bi-encoder (``RAGSPINE_RERANKER=embedding``).

The second model's cosine is added to the ranking's own score, both min-max normalised over the
snippets being rescored (the same convex rule the hybrid fusion uses), so the lexical evidence
behind the first ranking is kept rather than replaced. Passage vectors are cached by text, since
the same passages come back for related queries.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from ragspine.retrieval.link.snippet import Snippet
from ragspine.retrieval.rerank.base import ScoringReranker
from ragspine.retrieval.vector.embedding_backends import EmbeddingBackend, embed_matrix

CACHE_SIZE = 20_000


def unit_range(values: np.ndarray) -> np.ndarray:
    span = float(values.max() - values.min()) if values.size else 0.0
    return (values - values.min()) / span if span > 0 else np.zeros_like(values)


def prior_scores(results: Sequence[Snippet]) -> np.ndarray:
    """What the ranking so far thinks of each snippet: its latest score, or its rank."""
    n = len(results)
    scores = [s.scores.get("rerank", s.scores.get("fused")) for s in results]
    if any(v is None for v in scores):
        return np.arange(n, 0, -1, dtype=np.float64)
    return np.asarray(scores, dtype=np.float64)


class EmbeddingReranker(ScoringReranker):
    name = "embedding"

    def __init__(self, backend: EmbeddingBackend, *, top_n: int | None = 30) -> None:
        self.backend = backend
        self.top_n = top_n
        self._cache: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def _passage_vectors(self, texts: Sequence[str]) -> np.ndarray:
        keys = [hashlib.blake2b(t.encode(), digest_size=16).digest() for t in texts]
        with self._lock:
            missing = [i for i, k in enumerate(keys) if k not in self._cache]
        fresh = embed_matrix(self.backend, [texts[i] for i in missing], kind="passage")
        with self._lock:
            for i, vector in zip(missing, fresh):
                self._cache[keys[i]] = vector
            rows = [self._cache[k] for k in keys]
            for k in keys:
                self._cache.move_to_end(k)
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return np.stack(rows)

    def score(self, query: str, results: Sequence[Snippet]) -> list[float]:
        query_vector = embed_matrix(self.backend, [query], kind="query")[0]
        cosine = self._passage_vectors([s.text for s in results]) @ query_vector
        combined = unit_range(prior_scores(results)) + unit_range(cosine.astype(np.float64))
        return [float(x) for x in combined]
