"""The vector channel of a knowledge base: vectors by store row, following store generations.

Like the lexical index, it is derived from the chunk store and caught up on every search, so a
retired chunk is never returned (R12). Chunks whose text is unchanged by a re-ingest reuse their
vectors instead of being embedded again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ragspine.retrieval.chunking.chunk_store import ChangeSet
from ragspine.retrieval.vector.embedding_backends import EmbeddingBackend, embed_matrix
from ragspine.retrieval.vector.store import BoolArray, ExactVectorStore

EMBED_BATCH = 256


def _text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


class VectorIndex:
    def __init__(self, backend: EmbeddingBackend, store: ExactVectorStore | None = None) -> None:
        self.backend = backend
        self.store = store or ExactVectorStore(backend.dimension)
        self.generation = 0

    def apply(self, changes: ChangeSet, progress: Callable[[int, int], None] | None = None) -> None:
        """Embed what was added (in batches), reuse vectors of identical retired texts, drop the
        retired. An embedding failure raises before anything changes."""
        reusable: dict[bytes, int] = {}
        retired_slots = [slot for slot, _ in changes.retired]
        present = self.store.has(retired_slots) if retired_slots else np.zeros(0, dtype=bool)
        for (slot, text), ok in zip(changes.retired, present.tolist()):
            if ok:
                reusable.setdefault(_text_key(text), slot)
        reused_ids: list[int] = []
        reused_from: list[int] = []
        to_embed: list[tuple[int, str]] = []
        for slot, _, text in changes.added:
            source = reusable.get(_text_key(text))
            if source is None:
                to_embed.append((slot, text))
            else:
                reused_ids.append(slot)
                reused_from.append(source)
        vectors = []
        for start in range(0, len(to_embed), EMBED_BATCH):
            batch = to_embed[start : start + EMBED_BATCH]
            vectors.append(embed_matrix(self.backend, [t for _, t in batch], kind="passage"))
            if progress is not None:
                progress(min(start + EMBED_BATCH, len(to_embed)), len(to_embed))
        if reused_ids:
            copied = self.store.vectors(reused_from)
            self.store.upsert(reused_ids, copied)
        if vectors:
            self.store.upsert([slot for slot, _ in to_embed], np.concatenate(vectors))
        self.store.delete(retired_slots)
        self.generation = changes.generation

    def search(
        self, query: str, top_k: int, allowed: BoolArray | None = None
    ) -> list[tuple[int, float]]:
        vector = embed_matrix(self.backend, [query], kind="query")[0]
        return self.store.query(vector, top_k, allowed)

    def save(self, directory: Path) -> None:
        self.store.save(
            directory,
            {
                "model_id": self.backend.model_id,
                "generation": self.generation,
            },
        )

    @classmethod
    def load(cls, directory: Path, backend: EmbeddingBackend) -> VectorIndex:
        """Raises ``ValueError`` when absent, damaged, or built by another model."""
        store, meta = ExactVectorStore.load(directory)
        if meta.get("model_id") != backend.model_id or store.dimension != backend.dimension:
            raise ValueError(f"vectors in {directory} come from {meta.get('model_id')!r}")
        index = cls(backend, store)
        index.generation = int(str(meta["generation"]))
        return index
