from __future__ import annotations

import pytest

from ragspine.retrieval.lexical.retrieval import DEFAULT_RRF_K, rrf_fuse


def test_r22_rrf_adds_reciprocal_ranks_from_one() -> None:
    assert DEFAULT_RRF_K == 60
    fused = rrf_fuse([["a", "b"], ["b", "c"]])
    assert fused == pytest.approx({"a": 1 / 61, "b": 1 / 62 + 1 / 61, "c": 1 / 62})


def test_r22_custom_k_and_duplicates_count_once_per_ranking() -> None:
    assert rrf_fuse([["a", "a", "b"]], k=0) == {"a": 1.0, "b": 1 / 3}
    with pytest.raises(ValueError):
        rrf_fuse([["a"]], k=-1)
