"""The post-processing seam: choose, reorder or annotate the final ``top_k`` snippets from a
deeper pool (R60)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ragspine.retrieval.link.snippet import Snippet


@runtime_checkable
class Postprocessor(Protocol):
    def process(self, query: str, snippets: list[Snippet], top_k: int) -> list[Snippet]: ...
