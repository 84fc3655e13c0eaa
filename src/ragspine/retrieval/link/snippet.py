"""The snippet: a retrieved chunk with its citation and every stage's score."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from ragspine.retrieval.chunking.chunk_store import StoredChunk

T = TypeVar("T")


@dataclass(frozen=True)
class Snippet:
    """Attributes are named like the JSON keys of ``ragspine search --json``."""

    text: str
    doc_id: str
    chunk_id: str
    title: str
    source_locator: str
    source_path: str
    page: int | None
    char_start: int
    char_end: int
    sensitivity: str
    version: int
    metadata: dict[str, Any] = field(default_factory=dict)
    scores: dict[str, float | None] = field(default_factory=dict)
    library_id: str | None = None  # the knowledge base it came from, in multi-base searches
    prompt_text: str | None = None  # what a prompt should show instead of text; never cited

    @classmethod
    def from_chunk(cls, chunk: StoredChunk, scores: dict[str, float | None]) -> Snippet:
        return cls(
            text=chunk.text,
            doc_id=chunk.doc_id,
            chunk_id=chunk.chunk_id,
            title=chunk.title,
            source_locator=chunk.source_locator,
            source_path=chunk.source_path,
            page=chunk.page,
            char_start=chunk.char_start,
            char_end=chunk.char_end,
            sensitivity=chunk.sensitivity,
            version=chunk.version,
            metadata=dict(chunk.metadata),
            scores=dict(scores),
        )

    def with_scores(self, **scores: float | None) -> Snippet:
        return replace(self, scores={**self.scores, **scores})

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "doc_id": self.doc_id,
            "chunk_id": self.chunk_id,
            "title": self.title,
            "source_locator": self.source_locator,
            "source_path": self.source_path,
            "page": self.page,
            "char_start": self.char_start,
            "char_end": self.char_end,
            "sensitivity": self.sensitivity,
            "version": self.version,
            "metadata": dict(sorted(self.metadata.items())),
            "scores": dict(self.scores),
            **({} if self.library_id is None else {"library_id": self.library_id}),
            **({} if self.prompt_text is None else {"prompt_text": self.prompt_text}),
        }


class ResultList(list[T], Generic[T]):
    """A ranked list that also says how it was made: why a stage fell back
    (``degraded_reasons``, R6), whether the caller's filters were dropped to find anything
    (``filters_dropped``, R4), whether routing failed and every base was searched
    (``routing_fallback``, R31), which queries ran and which the safety gate rejected
    (``queries``, ``rejected_queries``, R45), and why nothing is returned when a corrective loop
    refused weak context (``refused``, R44). It is a plain list for everything else."""

    def __init__(
        self,
        items: Iterable[T] = (),
        *,
        degraded_reasons: Iterable[str] = (),
        filters_dropped: bool = False,
        routing_fallback: bool = False,
        queries: Iterable[str] = (),
        rejected_queries: Iterable[str] = (),
        refused: str | None = None,
    ) -> None:
        super().__init__(items)
        self.degraded_reasons = tuple(degraded_reasons)
        self.filters_dropped = filters_dropped
        self.routing_fallback = routing_fallback
        self.queries = tuple(queries)
        self.rejected_queries = tuple(rejected_queries)
        self.refused = refused

    @property
    def degraded(self) -> bool:
        return bool(self.degraded_reasons)

    def with_items(self, items: Iterable[T]) -> ResultList[T]:
        """Other items, the same facts about how they were found."""
        return ResultList(
            items,
            degraded_reasons=self.degraded_reasons,
            filters_dropped=self.filters_dropped,
            routing_fallback=self.routing_fallback,
            queries=self.queries,
            rejected_queries=self.rejected_queries,
            refused=self.refused,
        )
