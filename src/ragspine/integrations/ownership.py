"""Adapters that may own the knowledge base they opened (``from_knowledge_base``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ragspine.knowledge_base import KnowledgeBase
from ragspine.retrieval.link.narrative_link import (
    NarrativeIndexRetriever,
    build_narrative_retriever,
)

Adapter = TypeVar("Adapter", bound="OwnsKnowledgeBase")


class OwnsKnowledgeBase:
    """``close()`` and ``with`` for an adapter: only a knowledge base it opened itself is
    closed; one the caller passed in stays the caller's."""

    _owned: KnowledgeBase | None

    def close(self) -> None:
        if self._owned is not None:
            self._owned.close()
            self._owned = None

    def __enter__(self: Adapter) -> Adapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_owned(
    make: Callable[[NarrativeIndexRetriever], Adapter], path: str | Path, options: dict[str, Any]
) -> Adapter:
    """``make(link)`` over the knowledge base at ``path``, owning it (closed if ``make``
    fails)."""
    retriever, knowledge_base = build_narrative_retriever(path, **options)
    try:
        adapter = make(retriever)
    except Exception:
        knowledge_base.close()
        raise
    adapter._owned = knowledge_base
    return adapter
