"""Vector stores behind one protocol (R24); the exact in-process store is the default.

Vectors are addressed by the chunk store's row id (slot), like the lexical index, so filters
and scope resolve to the same mask for both channels.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from ragspine.retrieval.masks import narrow

FloatMatrix = npt.NDArray[np.float32]
BoolArray = npt.NDArray[np.bool_]


class VectorStore(Protocol):
    def upsert(self, ids: Sequence[int], vectors: FloatMatrix) -> None: ...

    def query(
        self, vector: npt.NDArray[np.float32], top_k: int, where: BoolArray | None = None
    ) -> list[tuple[int, float]]: ...

    def delete(self, ids: Sequence[int]) -> None: ...

    def count(self) -> int: ...


class ExactVectorStore:
    """Exact cosine over unit vectors: one matrix product per query, ties by id ascending.

    ``where`` is a mask of allowed ids, applied before scoring (R4, R25).
    """

    def __init__(self, dimension: int) -> None:
        if dimension <= 0:
            raise ValueError(f"dimension must be positive, got {dimension}")
        self.dimension = dimension
        self._matrix: FloatMatrix = np.zeros((0, dimension), dtype=np.float32)
        self._present: BoolArray = np.zeros(0, dtype=bool)
        self._lock = threading.Lock()

    def _ensure(self, size: int) -> None:
        if size <= self._present.shape[0]:
            return
        capacity = max(size, 2 * self._present.shape[0])
        matrix = np.zeros((capacity, self.dimension), dtype=np.float32)
        matrix[: self._matrix.shape[0]] = self._matrix
        present = np.zeros(capacity, dtype=bool)
        present[: self._present.shape[0]] = self._present
        self._matrix, self._present = matrix, present

    def upsert(self, ids: Sequence[int], vectors: FloatMatrix) -> None:
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.shape != (len(ids), self.dimension):
            raise ValueError(
                f"expected {len(ids)} vectors of dimension {self.dimension}, got {vectors.shape}"
            )
        if not len(ids):
            return
        index = np.asarray(ids, dtype=np.int64)
        with self._lock:
            self._own()
            self._ensure(int(index.max()) + 1)
            self._matrix[index] = vectors
            self._present[index] = True

    def _own(self) -> None:
        """A loaded matrix is a read-only memory map: copy it before the first write."""
        if not self._matrix.flags.writeable:
            self._matrix = np.array(self._matrix)
            self._present = np.array(self._present)

    def delete(self, ids: Sequence[int]) -> None:
        with self._lock:
            self._own()
            index = np.asarray([i for i in ids if i < self._present.shape[0]], dtype=np.int64)
            self._present[index] = False
            self._matrix[index] = 0.0

    def count(self) -> int:
        return int(self._present.sum())

    def vectors(self, ids: Sequence[int]) -> FloatMatrix:
        return np.array(self._matrix[np.asarray(ids, dtype=np.int64)], dtype=np.float32)

    @property
    def present(self) -> BoolArray:
        """Which ids hold a vector (a copy)."""
        present: BoolArray = np.array(self._present, dtype=bool)
        return present

    def has(self, ids: Sequence[int]) -> npt.NDArray[np.bool_]:
        index = np.asarray(ids, dtype=np.int64)
        inside = index < self._present.shape[0]
        found = np.zeros(index.shape[0], dtype=bool)
        found[inside] = self._present[index[inside]]
        return found

    def query(
        self, vector: npt.NDArray[np.float32], top_k: int, where: BoolArray | None = None
    ) -> list[tuple[int, float]]:
        if top_k <= 0:
            return []
        matrix = self._matrix
        ids = np.flatnonzero(narrow(self._present, where))
        if ids.size == 0:
            return []
        query = np.asarray(vector, dtype=np.float32)
        # one pass over the whole matrix beats gathering most of its rows into a copy
        whole = ids.size * 4 >= matrix.shape[0]
        scores = (matrix @ query)[ids] if whole else matrix[ids] @ query
        if ids.size > top_k:
            cut = ids.size - top_k
            kth = np.partition(scores, cut)[cut]
            keep = scores >= kth
            ids, scores = ids[keep], scores[keep]
        order = np.lexsort((ids, -scores))[:top_k]  # score descending, then id ascending
        return list(zip(ids[order].tolist(), scores[order].astype(np.float64).tolist()))

    # ------------------------------------------------------------- persistence
    def save(self, directory: Path, meta: dict[str, object]) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for name, array in (("vectors.npy", self._matrix), ("present.npy", self._present)):
            tmp = directory / f".{name}.tmp"
            with open(tmp, "wb") as fh:
                np.save(fh, array)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, directory / name)
        tmp = directory / ".meta.json.tmp"
        tmp.write_text(json.dumps({**meta, "dimension": self.dimension}), encoding="utf-8")
        os.replace(tmp, directory / "meta.json")

    @classmethod
    def load(cls, directory: Path) -> tuple[ExactVectorStore, dict[str, object]]:
        """Memory-maps the matrix; raises ``ValueError`` when nothing usable is there."""
        try:
            meta = json.loads((directory / "meta.json").read_text(encoding="utf-8"))
            store = cls(int(meta["dimension"]))
            store._matrix = np.load(directory / "vectors.npy", mmap_mode="r")
            store._present = np.load(directory / "present.npy")
        except (OSError, ValueError, KeyError) as exc:
            raise ValueError(f"no usable vector store in {directory}: {exc}") from exc
        if store._matrix.shape != (store._present.shape[0], store.dimension):
            raise ValueError(f"vector store in {directory} is inconsistent")
        return store, meta
