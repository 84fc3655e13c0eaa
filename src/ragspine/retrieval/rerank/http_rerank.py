"""A rerank service over HTTP (R52): the ``/rerank`` shape Jina, Cohere, llama.cpp, vLLM and
TEI's compatible route serve: ``{model, query, documents, top_n}`` in,
``{results: [{index, relevance_score}]}`` out (a bare list and ``score`` are accepted too).

A service that is down, refuses the key or answers garbage raises, and the chain marks the result
degraded (R6): nothing is skipped silently.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ragspine.errors import InvalidArgumentError
from ragspine.http_retry import RetryingJsonClient
from ragspine.retrieval.link.snippet import Snippet
from ragspine.retrieval.rerank.base import RerankError, ScoringReranker


def read_rerank_reply(reply: Any, n: int) -> list[float]:
    """One score per document from a rerank reply; documents the service left out score below
    every returned one (in their previous order)."""
    rows = reply.get("results") if isinstance(reply, dict) else reply
    if not isinstance(rows, list):
        raise RerankError(f"the rerank service sent no results: {str(reply)[:200]!r}")
    scores: dict[int, float] = {}
    for row in rows:
        try:
            index = int(row["index"])
            value = float(row["relevance_score"] if "relevance_score" in row else row["score"])
        except (KeyError, TypeError, ValueError) as exc:
            raise RerankError(f"the rerank service sent an unreadable result: {row!r}") from exc
        if not 0 <= index < n or index in scores or not math.isfinite(value):
            raise RerankError(f"the rerank service sent a bad result: {row!r}")
        scores[index] = value
    floor = min(scores.values(), default=0.0) - 1.0
    return [scores.get(i, floor) for i in range(n)]


@dataclass(frozen=True)
class HttpReranker(ScoringReranker, RetryingJsonClient):
    base_url: str
    model: str = ""
    api_key: str = ""
    timeout: float = 30.0
    max_retries: int = 1
    backoff: float = 0.25
    top_n: int | None = None

    name = "http"

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise InvalidArgumentError(f"rerank URL must be http(s), got {self.base_url!r}")
        if self.timeout <= 0:
            raise InvalidArgumentError(f"rerank timeout must be > 0, got {self.timeout}")

    @property
    def url(self) -> str:
        base = self.base_url.rstrip("/")
        return base if base.endswith("/rerank") else base + "/rerank"

    def score(self, query: str, results: Sequence[Snippet]) -> list[float]:
        body: dict[str, Any] = {
            "query": query,
            "documents": [s.text for s in results],
            "top_n": len(results),
        }
        if self.model:
            body["model"] = self.model
        reply = self._post(self.url, body, RerankError)
        return read_rerank_reply(reply, len(results))
