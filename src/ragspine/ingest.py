"""Load → chunk: turn files and in-memory documents into what the store writes (R14)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ragspine.documents.loaders import load_file
from ragspine.documents.walk import FileToIngest, read_sidecar
from ragspine.errors import InvalidArgumentError
from ragspine.retrieval.chunking.build import build_chunks
from ragspine.retrieval.chunking.chunk_store import SourceDocument
from ragspine.retrieval.chunking.chunking import Chunk
from ragspine.retrieval.sensitivity import merge_sensitivity


@dataclass(frozen=True)
class Document:
    """Text already in memory, e.g. a row of an evaluation corpus."""

    doc_id: str
    text: str
    title: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    sensitivity: str = "PUBLIC"


@dataclass(frozen=True)
class ChunkingPlan:
    max_chars: int
    overlap_chars: int

    def describe(self) -> dict[str, Any]:
        return {
            "name": "paragraph",
            "max_chars": self.max_chars,
            "overlap_chars": self.overlap_chars,
        }


@dataclass(frozen=True)
class PreparedDocument:
    source: SourceDocument
    chunks: list[Chunk]


@dataclass
class IngestReport:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    chunks_written: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    vector_error: str | None = None  # the embedding model failed; vectors catch up later

    @property
    def ok(self) -> bool:
        return not self.failed

    def to_dict(self) -> dict[str, Any]:
        return {
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "chunks_written": self.chunks_written,
            "failed": [{"path": p, "error": e} for p, e in self.failed],
            "vector_error": self.vector_error,
        }


def content_hash(payload: bytes | str, *parts: object) -> str:
    digest = hashlib.sha256(payload.encode() if isinstance(payload, str) else payload)
    digest.update(json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str).encode())
    return digest.hexdigest()


def _split_metadata(metadata: Mapping[str, Any]) -> tuple[dict[str, Any], Any, str | None]:
    rest = dict(metadata)
    sensitivity = rest.pop("sensitivity", None)
    title = rest.pop("title", None)
    return rest, sensitivity, None if title is None else str(title)


def file_hash(
    item: FileToIngest, data: bytes, caller: Mapping[str, Any], plan: ChunkingPlan
) -> str:
    """Covers the bytes, every metadata source and the chunker, so any change re-ingests."""
    return content_hash(data, read_sidecar(item.path), dict(caller), plan.describe())


def _prepare(
    doc_id: str,
    text: str,
    digest: str,
    plan: ChunkingPlan,
    *,
    title: str,
    metadata: dict[str, Any],
    sensitivity: str,
    source_path: str = "",
    pages: tuple[tuple[int, int, int], ...] = (),
) -> PreparedDocument:
    source = SourceDocument(
        doc_id=doc_id,
        text=text,
        content_hash=digest,
        title=title,
        source_path=source_path,
        sensitivity=sensitivity,
        metadata=metadata,
    )
    chunks = build_chunks(
        doc_id,
        text,
        title=title,
        source_path=source_path,
        pages=pages,
        metadata=metadata,
        sensitivity=sensitivity,
        max_chars=plan.max_chars,
        overlap_chars=plan.overlap_chars,
    )
    return PreparedDocument(source, chunks)


def prepare_file(
    item: FileToIngest, digest: str, caller: Mapping[str, Any], plan: ChunkingPlan
) -> PreparedDocument:
    """Front matter < sidecar < caller metadata; RESTRICTED from any of them sticks."""
    loaded = load_file(item.path)
    front, front_sens, front_title = _split_metadata(loaded.metadata)
    side, side_sens, side_title = _split_metadata(read_sidecar(item.path))
    given, given_sens, given_title = _split_metadata(caller)
    return _prepare(
        item.doc_id,
        loaded.text,
        digest,
        plan,
        title=given_title or side_title or front_title or loaded.title,
        metadata={**front, **side, **given},
        sensitivity=merge_sensitivity(front_sens, side_sens, given_sens),
        source_path=item.path.as_posix(),
        pages=loaded.pages,
    )


def prepare_document(doc: Document, plan: ChunkingPlan) -> PreparedDocument:
    if not isinstance(doc.doc_id, str) or not doc.doc_id:
        raise InvalidArgumentError(f"document id must be a non-empty string, got {doc.doc_id!r}")
    if not isinstance(doc.text, str):
        raise InvalidArgumentError(f"document {doc.doc_id!r}: text must be a string")
    metadata, meta_sens, meta_title = _split_metadata(doc.metadata)
    sensitivity = merge_sensitivity(doc.sensitivity, meta_sens)
    title = doc.title or meta_title or ""
    digest = content_hash(doc.text, title, metadata, sensitivity, plan.describe())
    return _prepare(
        doc.doc_id, doc.text, digest, plan, title=title, metadata=metadata, sensitivity=sensitivity
    )
