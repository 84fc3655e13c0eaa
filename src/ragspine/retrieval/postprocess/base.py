"""The post-processing seam: reorder, drop or annotate the final snippets (R60)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ragspine.retrieval.link.snippet import Snippet


@runtime_checkable
class Postprocessor(Protocol):
    def process(self, query: str, snippets: list[Snippet]) -> list[Snippet]: ...
