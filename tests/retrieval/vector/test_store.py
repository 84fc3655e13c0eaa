from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragspine.retrieval.vector.store import ExactVectorStore


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def test_r24_exact_cosine_with_ties_by_id_and_where_filters() -> None:
    store = ExactVectorStore(2)
    store.upsert([7, 3, 5], unit(np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])))
    assert store.count() == 3
    assert store.query(np.array([1.0, 0.0], np.float32), 2) == [(3, 1.0), (7, 1.0)]
    where = np.zeros(8, dtype=bool)
    where[[5, 7]] = True
    assert [i for i, _ in store.query(np.array([1.0, 0.0], np.float32), 3, where)] == [7, 5]
    store.delete([3])
    assert [i for i, _ in store.query(np.array([1.0, 0.0], np.float32), 3)] == [7, 5]
    assert store.query(np.array([1.0, 0.0], np.float32), 0) == []


def test_r24_save_and_memory_mapped_load(tmp_path: Path) -> None:
    store = ExactVectorStore(3)
    store.upsert([0, 2], unit(np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])))
    store.save(tmp_path / "v", {"model_id": "m"})
    loaded, meta = ExactVectorStore.load(tmp_path / "v")
    assert meta["model_id"] == "m" and loaded.count() == 2
    query = unit(np.array([[1.0, 1.0, 1.0]]))[0]
    assert loaded.query(query, 5) == store.query(query, 5)
    loaded.upsert([5], unit(np.array([[0.0, 0.0, 1.0]])))  # a loaded store is writable
    assert loaded.count() == 3
    with pytest.raises(ValueError):
        ExactVectorStore.load(tmp_path / "absent")


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(1, 20))
def test_r24_hnsw_with_oversampling_matches_exact_search(seed: int, k: int) -> None:
    pytest.importorskip("faiss")
    from ragspine.retrieval.vector.ann import HnswVectorStore

    rng = np.random.default_rng(seed)
    vectors = unit(rng.normal(size=(600, 16)))
    ann = HnswVectorStore(16)
    exact = ExactVectorStore(16)
    ids = list(range(0, 1200, 2))
    ann.upsert(ids, vectors)
    exact.upsert(ids, vectors)
    ann.delete(ids[:50])
    exact.delete(ids[:50])
    where = np.zeros(1200, dtype=bool)
    where[rng.choice(1200, 700, replace=False)] = True
    query = unit(rng.normal(size=(1, 16)))[0]
    for mask in (None, where):
        got = ann.query(query, k, mask)
        want = exact.query(query, k, mask)
        assert len({i for i, _ in got} & {i for i, _ in want}) >= 0.9 * len(want)
        assert all(i not in ids[:50] for i, _ in got)
        if mask is not None:
            assert all(mask[i] for i, _ in got)


def test_r24_a_saved_graph_that_lags_the_vectors_still_finds_every_vector(
    tmp_path: Path,
) -> None:
    """Vectors added after the graph was written are scored exactly, never missed (R12)."""
    pytest.importorskip("faiss")
    from ragspine.retrieval.vector.ann import GRAPH_FILE, HnswVectorStore

    rng = np.random.default_rng(3)
    vectors = unit(rng.normal(size=(300, 16)))
    ann = HnswVectorStore(16)
    ann.upsert(list(range(200)), vectors[:200])
    ann.save_graph(tmp_path)
    assert (tmp_path / GRAPH_FILE).is_file()
    exact = ExactVectorStore(16)
    exact.upsert(list(range(300)), vectors)
    exact.delete([0])
    reopened = HnswVectorStore.over(exact, tmp_path)
    for i in (5, 250, 299):  # in the graph, and added after it was saved
        assert reopened.query(vectors[i], 3)[0] == (i, pytest.approx(1.0, abs=1e-5))
    assert all(j != 0 for j, _ in reopened.query(vectors[0], 10))  # deleted after the save
    (tmp_path / GRAPH_FILE).write_bytes(b"garbage")
    rebuilt = HnswVectorStore.over(exact, tmp_path)  # damaged: rebuilt from the vectors
    assert rebuilt.query(vectors[250], 1)[0][0] == 250
