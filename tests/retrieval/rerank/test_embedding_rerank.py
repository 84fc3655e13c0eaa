"""Rescoring with a second bi-encoder: both signals count, vectors are cached, RESTRICTED text
is never embedded for reranking (R1)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ragspine.retrieval.rerank.cross_encoder import make_reranker
from ragspine.retrieval.rerank.embedding_rerank import EmbeddingReranker, prior_scores
from ragspine.retrieval.vector.embedding_backends import DeterministicEmbedding
from tests.retrieval.rerank.helpers import ids, snippet


class CountingEmbedding(DeterministicEmbedding):
    def __init__(self) -> None:
        super().__init__(64)
        self.embedded: list[str] = []

    def embed_array(self, texts: Sequence[str], *, kind: str = "passage") -> np.ndarray:
        self.embedded.extend(texts)
        return super().embed_array(texts, kind=kind)


def test_the_second_model_and_the_first_ranking_both_count() -> None:
    backend = CountingEmbedding()
    results = [snippet(0, "solar panels on roofs", fused=0.9),
               snippet(1, "wind turbines offshore wind", fused=0.5),
               snippet(2, "wind secret", "RESTRICTED", fused=0.4),
               snippet(3, "coal", fused=0.1)]  # fmt: skip
    out = EmbeddingReranker(backend).rerank("offshore wind", results)
    # prior: 1, .5, 0 (min-max); cosine favours c001 strongly: c001 first, RESTRICTED stays 3rd
    assert ids(out) == ["c001", "c000", "c002", "c003"]
    assert "wind secret" not in backend.embedded
    reranker = EmbeddingReranker(backend)
    reranker.rerank("q", results)
    count = len(backend.embedded)
    reranker.rerank("another query", results)
    assert len(backend.embedded) == count + 1  # only the query: passages come from the cache


def test_prior_scores_fall_back_to_rank_without_scores() -> None:
    results = [snippet(0), snippet(1)]
    assert prior_scores(results).tolist() == [0.0, 0.0]
    unscored = [s.with_scores(fused=None) for s in results]
    assert prior_scores(unscored).tolist() == [2.0, 1.0]


def test_factory_builds_a_chain_with_a_bundled_model() -> None:
    chain = make_reranker("embedding:deterministic")
    assert chain is not None and chain.name == "embedding"
