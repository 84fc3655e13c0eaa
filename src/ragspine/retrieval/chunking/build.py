"""From a document's text and lineage to citable :class:`Chunk` records."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragspine.retrieval.chunking.chunk_store import DIMENSIONS
from ragspine.retrieval.chunking.chunking import Chunk, chunk_document


def make_chunk_id(doc_id: str, ordinal: int) -> str:
    return f"{doc_id}#{ordinal:04d}"


def make_locator(source: str, start: int, end: int, page: int | None) -> str:
    """``path#page=3&chars=120-480``: the PDF open-parameter form, extended with the span."""
    fragment = f"page={page}&chars={start}-{end}" if page is not None else f"chars={start}-{end}"
    return f"{source}#{fragment}"


def _page_at(pages: Sequence[tuple[int, int, int]], offset: int) -> int | None:
    for number, start, end in pages:
        if start <= offset < end:
            return number
    return None


def build_chunks(
    doc_id: str,
    text: str,
    *,
    title: str = "",
    source_path: str = "",
    pages: Sequence[tuple[int, int, int]] = (),
    metadata: Mapping[str, Any] | None = None,
    sensitivity: str = "PUBLIC",
    max_chars: int,
    overlap_chars: int,
) -> list[Chunk]:
    metadata = dict(metadata or {})
    dimensions = {
        name: str(metadata[name]) for name in DIMENSIONS if metadata.get(name) is not None
    }
    chunks = []
    for ordinal, span in enumerate(
        chunk_document(text, max_chars=max_chars, overlap_chars=overlap_chars)
    ):
        page = _page_at(pages, span.start) if pages else None
        chunks.append(
            Chunk(
                chunk_id=make_chunk_id(doc_id, ordinal),
                doc_id=doc_id,
                text=span.text,
                char_start=span.start,
                char_end=span.end,
                ordinal=ordinal,
                title=title,
                source_path=source_path,
                source_locator=make_locator(source_path or doc_id, span.start, span.end, page),
                page=page,
                sensitivity=sensitivity,
                metadata=metadata,
                **dimensions,
            )
        )
    return chunks
