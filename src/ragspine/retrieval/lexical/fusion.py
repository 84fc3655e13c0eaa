"""Reciprocal Rank Fusion (R22)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

DEFAULT_RRF_K = 60


def rrf_fuse(rankings: Iterable[Sequence[str]], k: int = DEFAULT_RRF_K) -> dict[str, float]:
    """``score(id) = Σ 1 / (k + rank)`` over every ranking that holds ``id``; rank starts at 1.

    An id repeated inside one ranking counts at its best rank only.
    """
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    fused: dict[str, float] = {}
    for ranking in rankings:
        seen: set[str] = set()
        for rank, item in enumerate(ranking, start=1):
            if item in seen:
                continue
            seen.add(item)
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return fused
