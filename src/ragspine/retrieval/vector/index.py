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
from ragspine.retrieval.vector.ann import (
    ANN_MIN_VECTORS,
    GRAPH_FILE,
    HnswVectorStore,
    faiss_available,
)
from ragspine.retrieval.vector.embedding_backends import EmbeddingBackend, embed_matrix
from ragspine.retrieval.vector.store import BoolArray, ExactVectorStore

EMBED_BATCH = 256
VECTOR_SEARCHES = ("auto", "exact", "hnsw")
# A saved graph may lag the vectors (unseen ones are scored exactly), so it is rewritten only
# once this share of the vectors is missing from it, not at every small ingest.
_GRAPH_LAG = 0.1


def _text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


class VectorIndex:
    """``search``: ``exact``; ``hnsw`` (a graph, always); ``auto`` (a graph once there are
    50,000 vectors and faiss is installed, exact search below or under narrow filters)."""

    def __init__(
        self,
        backend: EmbeddingBackend,
        store: ExactVectorStore | None = None,
        *,
        search: str = "auto",
    ) -> None:
        if search not in VECTOR_SEARCHES:
            raise ValueError(f"unknown vector search {search!r}; use one of {VECTOR_SEARCHES}")
        self.backend = backend
        self.exact = store or ExactVectorStore(backend.dimension)
        self.search_kind = search
        self.ann: HnswVectorStore | None = None
        self.generation = 0
        self._graph_saved_count = 0

    def _wants_graph(self) -> bool:
        if self.search_kind == "auto":
            return self.exact.count() >= ANN_MIN_VECTORS and faiss_available()
        return self.search_kind == "hnsw"

    def _attach_graph(self, directory: Path | None = None) -> None:
        if self.ann is None and self._wants_graph():
            floor = ANN_MIN_VECTORS if self.search_kind == "auto" else 0
            self.ann = HnswVectorStore.over(self.exact, directory, min_vectors=floor)
            self._graph_saved_count = self.exact.count() if directory is not None else 0

    def apply(self, changes: ChangeSet, progress: Callable[[int, int], None] | None = None) -> None:
        """Embed what was added (in batches), reuse vectors of identical retired texts, drop the
        retired. An embedding failure raises before anything changes."""
        reusable: dict[bytes, int] = {}
        retired_slots = [slot for slot, _ in changes.retired]
        present = self.exact.has(retired_slots) if retired_slots else np.zeros(0, dtype=bool)
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
        store = self.ann or self.exact
        if reused_ids:
            store.upsert(reused_ids, self.exact.vectors(reused_from))
        if vectors:
            store.upsert([slot for slot, _ in to_embed], np.concatenate(vectors))
        store.delete(retired_slots)
        self.generation = changes.generation
        self._attach_graph()

    def search(
        self, query: str, top_k: int, allowed: BoolArray | None = None
    ) -> list[tuple[int, float]]:
        vector = embed_matrix(self.backend, [query], kind="query")[0]
        return (self.ann or self.exact).query(vector, top_k, allowed)

    def describe(self) -> dict[str, object]:
        return {
            "model_id": self.backend.model_id,
            "count": self.exact.count(),
            "generation": self.generation,
            "search": "hnsw" if self.ann is not None else "exact",
        }

    def save(self, directory: Path) -> None:
        self.exact.save(
            directory,
            {
                "model_id": self.backend.model_id,
                "generation": self.generation,
            },
        )
        graph_file = directory / GRAPH_FILE
        if self.ann is None:
            graph_file.unlink(missing_ok=True)
        elif (
            not graph_file.is_file()
            or self.exact.count() - self._graph_saved_count > _GRAPH_LAG * self.exact.count()
        ):
            self.ann.save_graph(directory)
            self._graph_saved_count = self.exact.count()

    @classmethod
    def load(
        cls, directory: Path, backend: EmbeddingBackend, *, search: str = "auto"
    ) -> VectorIndex:
        """Raises ``ValueError`` when absent, damaged, or built by another model."""
        store, meta = ExactVectorStore.load(directory)
        if meta.get("model_id") != backend.model_id or store.dimension != backend.dimension:
            raise ValueError(f"vectors in {directory} come from {meta.get('model_id')!r}")
        index = cls(backend, store, search=search)
        index.generation = int(str(meta["generation"]))
        index._attach_graph(directory)
        return index
