"""Snippets for reranker tests."""

from __future__ import annotations

from ragspine.retrieval.link.snippet import Snippet


def snippet(i: int, text: str = "", sensitivity: str = "PUBLIC", fused: float = 0.0) -> Snippet:
    return Snippet(
        text=text or f"passage {i} ({sensitivity})",
        doc_id=f"d{i}",
        chunk_id=f"c{i:03d}",
        title=f"Doc {i}",
        source_locator=f"d{i}.txt#chars=0-10",
        source_path=f"d{i}.txt",
        page=None,
        char_start=0,
        char_end=10,
        sensitivity=sensitivity,
        version=1,
        scores={"bm25": None, "vector": None, "fused": fused},
    )


def ids(snippets: list[Snippet]) -> list[str]:
    return [s.chunk_id for s in snippets]
