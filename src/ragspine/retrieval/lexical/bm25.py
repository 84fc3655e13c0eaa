"""Okapi BM25 scoring, as a small pure reference (R21).

The index in :mod:`.index` computes exactly these numbers from postings; this function is the
readable definition and the oracle for tests.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

DEFAULT_BM25_K1 = 1.5
DEFAULT_BM25_B = 0.75


def bm25_idf(doc_freq: int, n_docs: int) -> float:
    """Robertson–Spärck Jones idf, floored at 0 so very common terms never count against a match."""
    return math.log(max(1.0, (n_docs - doc_freq + 0.5) / (doc_freq + 0.5)))


def bm25_scores(
    query_tokens: Sequence[str],
    docs_tokens: Sequence[Sequence[str]],
    k1: float = DEFAULT_BM25_K1,
    b: float = DEFAULT_BM25_B,
) -> list[float]:
    """Score every document for the query; a repeated query token counts once per occurrence."""
    n_docs = len(docs_tokens)
    if n_docs == 0:
        return []
    lengths = [len(doc) for doc in docs_tokens]
    avg_len = sum(lengths) / n_docs or 1.0
    counts = [Counter(doc) for doc in docs_tokens]
    doc_freq = Counter(term for c in counts for term in c)
    scores = [0.0] * n_docs
    for term in query_tokens:
        df = doc_freq.get(term, 0)
        if not df:
            continue
        idf = bm25_idf(df, n_docs)
        for i, c in enumerate(counts):
            tf = c.get(term, 0)
            if tf:
                norm = k1 * (1.0 - b + b * lengths[i] / avg_len)
                scores[i] += idf * tf * (k1 + 1.0) / (tf + norm)
    return scores
