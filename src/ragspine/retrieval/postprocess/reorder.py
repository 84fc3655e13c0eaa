"""Post-processors that change which snippets an LLM reads, and in which order (R60).

``MMR`` trades a little relevance for less repetition; ``LostInTheMiddle`` puts the best
snippets at both ends of the context, where long-context models attend most. Neither touches a
snippet's text or citation (R2).
"""

from __future__ import annotations

import numpy as np

from ragspine.errors import InvalidArgumentError
from ragspine.retrieval.link.snippet import Snippet
from ragspine.retrieval.rerank.embedding_rerank import prior_scores, unit_range
from ragspine.retrieval.vector.embedding_backends import EmbeddingBackend, embed_matrix


class MMR:
    """Maximal Marginal Relevance: pick ``top_k`` from the pool, one by one, each maximising
    ``λ · relevance − (1 − λ) · max cosine to those already picked``."""

    name = "mmr"

    def __init__(self, backend: EmbeddingBackend, *, lambda_: float = 0.7) -> None:
        if not 0.0 <= lambda_ <= 1.0:
            raise InvalidArgumentError(f"MMR λ must be within [0, 1], got {lambda_}")
        self.backend = backend
        self.lambda_ = lambda_

    def process(self, query: str, snippets: list[Snippet], top_k: int) -> list[Snippet]:
        if len(snippets) < 3:
            return list(snippets[:top_k])
        vectors = embed_matrix(self.backend, [s.text for s in snippets], kind="passage")
        similarity = vectors @ vectors.T
        scores = unit_range(prior_scores(snippets))
        chosen: list[int] = []
        left = list(range(len(snippets)))
        while left and len(chosen) < top_k:
            redundancy = (
                similarity[np.ix_(left, chosen)].max(axis=1) if chosen else np.zeros(len(left))
            )
            marginal = self.lambda_ * scores[left] - (1 - self.lambda_) * redundancy
            best = left[int(np.argmax(marginal))]  # argmax: the first of equals, so stable
            chosen.append(best)
            left.remove(best)
        return [snippets[i] for i in chosen]


class LostInTheMiddle:
    """Best first and last, weakest in the middle: 1, 3, 5, … then …, 6, 4, 2."""

    name = "lost_in_middle"

    def process(self, query: str, snippets: list[Snippet], top_k: int) -> list[Snippet]:
        head = snippets[:top_k]
        return list(head[0::2]) + list(reversed(head[1::2]))
