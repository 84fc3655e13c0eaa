"""Approximate search for large collections: HNSW candidates, re-scored exactly (R24).

The graph proposes ``top_k × oversample`` candidates among the allowed ids; the exact store then
scores those and applies the same ``(-score, id)`` order, so results differ from exact search
only when the graph misses a true neighbour (AutoFlow's oversampling, default × 5). Vectors the
graph does not hold yet (added after a saved graph was written) are always scored exactly, and
retired ones are masked out, so a graph that lags the store costs speed, never correctness.
Needs ``faiss-cpu`` (extra ``[ann]``).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ragspine.retrieval.masks import narrow
from ragspine.retrieval.vector.store import BoolArray, ExactVectorStore, FloatMatrix

DEFAULT_OVERSAMPLE = 5
# Below this many allowed vectors one exact matrix product is about as fast as the graph
# (measured: exact 7 ms at 50,000 × 384 on 2 cores, HNSW 1.3 ms), and always exact.
ANN_MIN_VECTORS = 50_000
GRAPH_FILE = "hnsw.faiss"


def faiss_available() -> bool:
    return importlib.util.find_spec("faiss") is not None


class HnswVectorStore:
    """An HNSW graph (faiss, inner product on unit vectors) over an :class:`ExactVectorStore`,
    which stays the source of truth for vectors, presence and final scores."""

    def __init__(
        self,
        dimension: int,
        *,
        exact: ExactVectorStore | None = None,
        oversample: int = DEFAULT_OVERSAMPLE,
        m: int = 32,
        ef_construction: int = 200,
        ef_search: int = 128,
        min_vectors: int = 0,
    ) -> None:
        try:
            import faiss
        except ImportError as exc:
            raise ImportError("HNSW search needs faiss-cpu: pip install 'ragspine[ann]'") from exc
        if oversample < 1:
            raise ValueError(f"oversample must be >= 1, got {oversample}")
        self._faiss: Any = faiss
        self.exact = exact if exact is not None else ExactVectorStore(dimension)
        if self.exact.dimension != dimension:
            raise ValueError(f"store has dimension {self.exact.dimension}, not {dimension}")
        self.dimension = dimension
        self.oversample = oversample
        self.ef_search = ef_search
        self.min_vectors = min_vectors
        graph = faiss.IndexHNSWFlat(dimension, m, faiss.METRIC_INNER_PRODUCT)
        graph.hnsw.efConstruction = ef_construction
        self._graph: Any = faiss.IndexIDMap2(graph)
        self._in_graph: BoolArray = np.zeros(0, dtype=bool)
        self._add_to_graph(np.flatnonzero(self.exact.present))

    def _add_to_graph(self, ids: npt.NDArray[np.int64]) -> None:
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size and ids.max() >= self._in_graph.shape[0]:
            grown = np.zeros(max(int(ids.max()) + 1, 2 * self._in_graph.shape[0]), dtype=bool)
            grown[: self._in_graph.shape[0]] = self._in_graph
            self._in_graph = grown
        ids = ids[~self._in_graph[ids]]
        if ids.size:
            self._graph.add_with_ids(self.exact.vectors(ids.tolist()), ids)
            self._in_graph[ids] = True

    def upsert(self, ids: Sequence[int], vectors: FloatMatrix) -> None:
        """Ids are immutable once in the graph (store rows never change their text)."""
        index = np.asarray(ids, dtype=np.int64)
        inside = index[index < self._in_graph.shape[0]]
        again = inside[self._in_graph[inside]]
        if again.size:
            raise ValueError(
                f"ids {again[:5].tolist()} are already in the graph; ids never change content"
            )
        self.exact.upsert(ids, vectors)
        self._add_to_graph(index)

    def delete(self, ids: Sequence[int]) -> None:
        """Deleted ids stay in the graph but are never proposed again (masked out)."""
        self.exact.delete(ids)

    def count(self) -> int:
        return self.exact.count()

    def query(
        self, vector: npt.NDArray[np.float32], top_k: int, where: BoolArray | None = None
    ) -> list[tuple[int, float]]:
        if top_k <= 0 or self.count() == 0:
            return []
        allowed = narrow(self.exact.present, where)
        allowed_ids = np.flatnonzero(allowed)
        if allowed_ids.size < max(self.min_vectors, 1):
            return self.exact.query(vector, top_k, allowed)  # small or narrow: exact is as fast
        k = min(top_k * self.oversample, allowed_ids.size)
        params = self._faiss.SearchParametersHNSW(efSearch=max(self.ef_search, k))
        in_graph = narrow(np.ones(allowed.shape[0], dtype=bool), self._in_graph)
        if np.count_nonzero(in_graph & allowed) < self._graph.ntotal:
            # Some graph ids are retired or filtered out: a bitmap of the allowed ids, cheap to
            # build per query (unlike a hash set of ids); it must outlive the search.
            bitmap = np.packbits(allowed, bitorder="little")
            params.sel = self._faiss.IDSelectorBitmap(
                bitmap.shape[0],
                self._faiss.swig_ptr(bitmap),  # size in bytes
            )
        query = np.ascontiguousarray(vector, dtype=np.float32).reshape(1, -1)
        _, found = self._graph.search(query, k, params=params)
        candidates = ~in_graph  # vectors the graph does not hold are scored exactly
        candidates[found[0][found[0] >= 0]] = True
        return self.exact.query(vector, top_k, candidates & allowed)

    # ------------------------------------------------------------- persistence
    def save_graph(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f".{GRAPH_FILE}.tmp"
        self._faiss.write_index(self._graph, str(tmp))
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, directory / GRAPH_FILE)

    @classmethod
    def over(
        cls, exact: ExactVectorStore, directory: Path | None = None, **options: Any
    ) -> HnswVectorStore:
        """A graph over ``exact``: read from ``directory`` when a usable one was saved there
        (then only vectors it lacks are added), else built from every present vector."""
        graph_path = directory / GRAPH_FILE if directory is not None else None
        if graph_path is None or not graph_path.is_file():
            return cls(exact.dimension, exact=exact, **options)
        store = cls(exact.dimension, exact=ExactVectorStore(exact.dimension), **options)
        try:
            graph = store._faiss.read_index(str(graph_path))
            ids = store._faiss.vector_to_array(graph.id_map).astype(np.int64)
        except (RuntimeError, AttributeError):
            graph = None  # damaged
        if graph is None or graph.d != exact.dimension:
            return cls(exact.dimension, exact=exact, **options)  # rebuilt from the vectors
        store.exact, store._graph = exact, graph
        store._in_graph = np.zeros(int(ids.max()) + 1 if ids.size else 0, dtype=bool)
        store._in_graph[ids] = True
        store._add_to_graph(np.flatnonzero(exact.present))
        return store
