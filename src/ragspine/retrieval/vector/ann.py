"""Approximate search for large collections: HNSW candidates, re-scored exactly (R24).

The graph proposes ``top_k × oversample`` candidates among the allowed ids; the exact store then
scores those and applies the same ``(-score, id)`` order, so results differ from exact search
only when the graph misses a true neighbour (AutoFlow's oversampling, default × 5). Needs
``faiss-cpu`` (extra ``[ann]``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ragspine.retrieval.masks import narrow
from ragspine.retrieval.vector.store import BoolArray, ExactVectorStore, FloatMatrix

DEFAULT_OVERSAMPLE = 5


class HnswVectorStore:
    def __init__(
        self,
        dimension: int,
        *,
        oversample: int = DEFAULT_OVERSAMPLE,
        m: int = 32,
        ef_construction: int = 200,
        ef_search: int = 128,
    ) -> None:
        try:
            import faiss
        except ImportError as exc:
            raise ImportError("HNSW search needs faiss-cpu: pip install 'ragspine[ann]'") from exc
        if oversample < 1:
            raise ValueError(f"oversample must be >= 1, got {oversample}")
        self._faiss: Any = faiss
        self.exact = ExactVectorStore(dimension)
        self.dimension = dimension
        self.oversample = oversample
        self.ef_search = ef_search
        graph = faiss.IndexHNSWFlat(dimension, m, faiss.METRIC_INNER_PRODUCT)
        graph.hnsw.efConstruction = ef_construction
        self._graph: Any = faiss.IndexIDMap2(graph)
        self._in_graph: set[int] = set()

    def upsert(self, ids: Sequence[int], vectors: FloatMatrix) -> None:
        """Ids are immutable once in the graph (store rows never change their text)."""
        again = [i for i in ids if i in self._in_graph]
        if again:
            raise ValueError(f"ids {again[:5]} are already in the graph; ids never change content")
        self.exact.upsert(ids, vectors)
        if len(ids):
            matrix = np.ascontiguousarray(vectors, dtype=np.float32)
            self._graph.add_with_ids(matrix, np.asarray(ids, dtype=np.int64))
            self._in_graph.update(int(i) for i in ids)

    def delete(self, ids: Sequence[int]) -> None:
        """Deleted ids stay in the graph but are never proposed again (filtered out)."""
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
        if allowed_ids.size == 0:
            return []
        k = min(top_k * self.oversample, allowed_ids.size)
        params = self._faiss.SearchParametersHNSW(efSearch=max(self.ef_search, k))
        if allowed_ids.size < allowed.shape[0]:
            params.sel = self._faiss.IDSelectorBatch(allowed_ids.astype(np.int64))
        query = np.ascontiguousarray(vector, dtype=np.float32).reshape(1, -1)
        _, found = self._graph.search(query, k, params=params)
        candidates = found[0][found[0] >= 0]
        mask = np.zeros(allowed.shape[0], dtype=bool)
        mask[candidates] = True
        return self.exact.query(vector, top_k, mask & allowed)
