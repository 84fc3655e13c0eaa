from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ragspine import Document, FilterError, InvalidArgumentError, KnowledgeBase, KnowledgeBaseError
from tests.conftest import EXAMPLES

DOCS = [
    Document("acme-2023", "ACME revenue fell in 2023 because demand for widgets dropped.",
             title="ACME 2023", metadata={"entity": "ACME", "year": 2023, "lang": "en"}),
    Document("acme-2021", "ACME revenue grew in 2021 on strong widget demand.",
             title="ACME 2021", metadata={"entity": "ACME", "year": 2021, "lang": "en"}),
    Document("beta-zh", "贝塔公司营收下滑，原因是原材料成本上升。", title="贝塔",
             metadata={"entity": "BETA", "year": 2023, "lang": "zh"}),
    Document("secret", "ACME internal revenue forecast for 2024.", sensitivity="restricted",
             metadata={"entity": "ACME", "year": 2024, "lang": "en"}),
]  # fmt: skip


@pytest.fixture()
def kb(tmp_path: Path) -> KnowledgeBase:
    knowledge_base = KnowledgeBase(tmp_path / "kb")
    knowledge_base.add_documents(DOCS)
    yield knowledge_base
    knowledge_base.close()


def test_r100_one_directory_holds_store_and_index(kb: KnowledgeBase) -> None:
    names = {p.name for p in kb.path.iterdir()}
    assert {"kb.json", "chunks.db", "lexical"} <= names


def test_search_returns_snippets_with_lineage(kb: KnowledgeBase) -> None:
    (top, *_) = kb.search("why did widget demand drop", top_k=3)
    assert top.doc_id == "acme-2023" and top.chunk_id == "acme-2023#0000"
    assert top.title == "ACME 2023" and top.sensitivity == "PUBLIC"
    assert top.metadata == {"entity": "ACME", "year": 2023, "lang": "en"}
    assert set(top.scores) == {"bm25", "vector", "fused"} and top.scores["vector"] is None
    assert top.source_locator == f"acme-2023#chars={top.char_start}-{top.char_end}"
    assert kb.search("营收下滑", top_k=1)[0].doc_id == "beta-zh"


def test_r1_sensitivity_is_normalised_and_kept(kb: KnowledgeBase) -> None:
    hits = kb.search("internal forecast", top_k=5)
    assert [h.sensitivity for h in hits if h.doc_id == "secret"] == ["RESTRICTED"]


def test_r2_snippet_text_is_the_exact_source_span(tmp_path: Path) -> None:
    with KnowledgeBase(tmp_path / "kb") as kb:
        kb.ingest(EXAMPLES, exclude=["_drafts/**"])
        for query in ("white matter development", "铁路 公司", "mTOR epilepsy", "HTRF"):
            for snippet in kb.search(query, top_k=10):
                source = kb.store.source_text(snippet.doc_id)
                assert source is not None
                assert source[snippet.char_start : snippet.char_end] == snippet.text


def test_r27_filters_narrow_before_scoring(kb: KnowledgeBase) -> None:
    ids = lambda hits: sorted({h.doc_id for h in hits})  # noqa: E731
    assert ids(kb.search("revenue", filters={"year": {"gte": 2023}})) == ["acme-2023", "secret"]
    assert ids(kb.search("revenue", filters={"year": {"between": [2021, 2023]}, "lang": "en"})) == [
        "acme-2021",
        "acme-2023",
    ]
    assert ids(kb.search("revenue", filters={"lang": {"in": ["zh"]}})) == []
    assert ids(kb.search("营收", filters={"entity": {"nin": ["ACME"]}})) == ["beta-zh"]
    assert ids(kb.search("revenue", filters={"sensitivity": "RESTRICTED"})) == ["secret"]


def test_r28_scope_by_doc_ids_and_empty_scope_is_empty(kb: KnowledgeBase) -> None:
    assert {h.doc_id for h in kb.search("revenue", doc_ids=["acme-2021"])} == {"acme-2021"}
    assert kb.search("revenue", doc_ids=[]) == []
    assert kb.search("revenue", doc_ids=["no-such-doc"]) == []


def test_r12_replaced_and_retired_chunks_are_never_returned(kb: KnowledgeBase) -> None:
    kb.add_documents([Document("acme-2023", "Completely rewritten: profits soared.")])
    assert all(h.doc_id != "acme-2023" for h in kb.search("widgets dropped"))
    assert kb.search("profits soared")[0].version == 2
    assert kb.delete_document("acme-2023") == 1
    assert all(h.doc_id != "acme-2023" for h in kb.search("profits soared"))


def test_r12_index_follows_writes_from_another_process(kb: KnowledgeBase) -> None:
    assert kb.search("zeppelin") == []
    script = (
        "import sys; from ragspine import KnowledgeBase, Document\n"
        "kb = KnowledgeBase(sys.argv[1])\n"
        "kb.add_documents([Document('zep', 'A zeppelin flew over.')])\n"
        "kb.delete_document('acme-2021')\n"
    )
    subprocess.run([sys.executable, "-c", script, str(kb.path)], check=True)
    assert [h.doc_id for h in kb.search("zeppelin")] == ["zep"]
    assert all(h.doc_id != "acme-2021" for h in kb.search("revenue grew strong"))


def test_r12_missing_or_damaged_index_is_rebuilt_from_the_store(kb: KnowledgeBase) -> None:
    expected = kb.search("revenue", top_k=10)
    kb.close()
    shutil.rmtree(kb.path / "lexical")
    with KnowledgeBase(kb.path) as reopened:
        assert reopened.search("revenue", top_k=10) == expected
    (kb.path / "lexical" / "meta.json").write_text("{not json")
    with KnowledgeBase(kb.path) as reopened:
        assert reopened.search("revenue", top_k=10) == expected


def test_r3_same_corpus_gives_identical_results_whatever_the_history(tmp_path: Path) -> None:
    a = KnowledgeBase(tmp_path / "a")
    a.add_documents(DOCS)
    b = KnowledgeBase(tmp_path / "b")
    b.add_documents([Document("tmp", "ACME revenue temporary widgets")])
    for doc in reversed(DOCS):
        b.add_documents([doc])
    b.delete_document("tmp")
    for query in ("ACME revenue", "营收", "widget demand 2023"):
        assert a.search(query, top_k=10) == b.search(query, top_k=10)
    a.close()
    b.close()


@pytest.mark.parametrize(
    "kwargs",
    [{"top_k": 0}, {"top_k": -1}, {"top_k": True}, {"top_k": "5"}, {"mode": "nonsense"},
     {"doc_ids": "acme-2023"}],
)  # fmt: skip
def test_r6_bad_search_arguments_are_clear_errors(kb: KnowledgeBase, kwargs: dict) -> None:
    with pytest.raises(InvalidArgumentError):
        kb.search("revenue", **kwargs)


def test_r26_dense_modes_say_they_need_an_embedding_backend(kb: KnowledgeBase) -> None:
    with pytest.raises(InvalidArgumentError, match="embedding backend"):
        kb.search("revenue", mode="hybrid")
    for mode in ("auto", "bm25", "lexical", "economy", "text"):
        assert kb.search("revenue", mode=mode) == kb.search("revenue")


def test_r4_bad_filter_raises_and_never_widens(kb: KnowledgeBase) -> None:
    with pytest.raises(FilterError):
        kb.search("revenue", filters={"year": {"greater": 2020}})


def test_r14_ingest_reports_bad_files_and_ingests_the_rest(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "good.txt").write_text("Useful text about turbines.", encoding="utf-8")
    (src / "bad.pdf").write_bytes(b"%PDF-garbage")
    (src / "bad.md").write_text("---\n: [\n---\nx", encoding="utf-8")
    with KnowledgeBase(tmp_path / "kb") as kb:
        report = kb.ingest(src)
        assert report.added == 1 and not report.ok
        assert sorted(Path(p).name for p, _ in report.failed) == ["bad.md", "bad.pdf"]
        assert all(Path(p).name in e for p, e in report.failed)
        assert [h.doc_id for h in kb.search("turbines")] == ["src/good.txt"]


def test_r14_unchanged_files_are_skipped_and_changes_reingested(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(EXAMPLES, src)
    seen: list[tuple[int, int]] = []
    with KnowledgeBase(tmp_path / "kb") as kb:
        first = kb.ingest(src, exclude=["_drafts/**"], progress=lambda d, t, _: seen.append((d, t)))
        assert (first.added, first.updated, first.unchanged) == (70, 0, 0)
        assert seen[-1] == (70, 70)
        again = kb.ingest(src, exclude=["_drafts/**"])
        assert (again.added, again.updated, again.unchanged, again.chunks_written) == (0, 0, 70, 0)
        target = next(src.glob("zh/*.txt"))
        target.write_text(
            target.read_text(encoding="utf-8") + "\n\n新增一段：风力发电机。", encoding="utf-8"
        )
        sidecar = next(src.glob("en/*.pdf.meta.json"))
        sidecar.write_text('{"entity": "Changed"}', encoding="utf-8")
        third = kb.ingest(src, exclude=["_drafts/**"])
        assert (third.added, third.updated, third.unchanged) == (0, 2, 68)
        assert kb.search("风力发电机")[0].source_path.endswith(target.name)


def test_r14_metadata_sources_and_restricted_never_downgraded(tmp_path: Path) -> None:
    with KnowledgeBase(tmp_path / "kb") as kb:
        kb.ingest(EXAMPLES, {"sensitivity": "PUBLIC", "batch": "demo"}, exclude=["_drafts/**"])
        docs = {d.doc_id: d for d in kb.documents()}
        restricted = sorted(k for k, d in docs.items() if d.sensitivity == "RESTRICTED")
        assert restricted == [
            "corpus/en/scifact-18670-dna-methylome-human.md",
            "corpus/en/scifact-70115-bayesian-measures-model.md",
            "corpus/en/scifact-97884-sacroiliac-joint-spondyloarthropathies.txt",
            "corpus/zh/cmrc-dev-5.md",
        ]
        (hit,) = kb.search("莱索托", top_k=1, filters={"entity": "莱索托"})
        assert hit.metadata["period"] == "2018" and hit.metadata["batch"] == "demo"
        pdf_pages = {h.page for h in kb.search("mTOR epileptogenesis kainate", top_k=5)}
        assert pdf_pages == {1, 2}
        for hit in kb.search("mTOR epileptogenesis kainate", top_k=5):
            assert f"#page={hit.page}&chars={hit.char_start}-{hit.char_end}" in hit.source_locator


def test_settings_are_recorded_and_conflicts_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGSPINE_STEMMER", "none")
    with KnowledgeBase(tmp_path / "kb", chunk_chars=300) as kb:
        assert kb.config["tokenizer"]["stemmer"] == "none"
    monkeypatch.delenv("RAGSPINE_STEMMER")
    with KnowledgeBase(tmp_path / "kb") as kb:  # recorded settings win over defaults
        assert kb.settings.stemmer == "none" and kb.settings.chunk_chars == 300
    with pytest.raises(KnowledgeBaseError, match="stemmer"):
        KnowledgeBase(tmp_path / "kb", stemmer="english")
    with pytest.raises(InvalidArgumentError):
        KnowledgeBase(tmp_path / "other", chunk_chars=50, overlap_chars=80)


def test_knowledge_base_refuses_foreign_directories(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "file.txt").write_text("x")
    with pytest.raises(KnowledgeBaseError):
        KnowledgeBase(tmp_path / "data")
    with pytest.raises(KnowledgeBaseError):
        KnowledgeBase(tmp_path / "absent", create=False)


def test_add_documents_rejects_bad_documents_without_writing(tmp_path: Path) -> None:
    with KnowledgeBase(tmp_path / "kb") as kb:
        good = [Document(f"ok{i}", f"fine text {i}") for i in range(600)]  # > one write batch
        with pytest.raises(InvalidArgumentError):
            kb.add_documents([*good, Document("", "no id")])
        with pytest.raises(InvalidArgumentError):
            kb.add_documents([*good, Document("x", None)])  # type: ignore[arg-type]
        assert kb.store.counts()["chunks"] == 0


def test_per_document_ranking_keeps_each_documents_best_chunk(tmp_path: Path) -> None:
    with KnowledgeBase(tmp_path / "kb", chunk_chars=60, overlap_chars=0) as kb:
        kb.add_documents(
            Document(f"doc{i}", "\n\n".join(f"turbine blade part {j} " * (1 + (i + j) % 3)
                                            for j in range(4)))
            for i in range(12)
        )  # fmt: skip
        chunks = kb.retrieve("turbine blade", top_k=1000)
        docs = kb.retrieve("turbine blade", top_k=5, per_document=True)
        best_first: dict[str, int] = {}
        for slot, chunk_id in zip(chunks.slots, chunks.chunk_ids):
            best_first.setdefault(chunk_id.split("#")[0], slot)
        assert docs.doc_ids == list(best_first)[:5]
        assert docs.slots == list(best_first.values())[:5]
        assert len(kb.retrieve("turbine", top_k=50, per_document=True).doc_ids or []) == 12


def test_r5_no_reranker_by_default_and_none_is_byte_identical(kb: KnowledgeBase) -> None:
    plain = kb.search("ACME revenue", top_k=3)
    assert not plain.degraded and plain.degraded_reasons == ()
    assert [s.to_dict() for s in kb.search("ACME revenue", top_k=3, rerank="none")] == [
        s.to_dict() for s in plain
    ]
    assert all("rerank" not in s.scores for s in plain)


def test_r51_search_reranks_a_deeper_pool_then_cuts_to_top_k(kb: KnowledgeBase) -> None:
    class Reverse:
        name = "reverse"

        def __init__(self) -> None:
            self.seen: list[int] = []

        def rerank(self, query: str, results: list) -> list:  # type: ignore[type-arg]
            self.seen.append(len(results))
            return list(reversed(results))

    reverse = Reverse()
    query = "ACME revenue widget demand"
    found = kb.search(query, top_k=1, rerank=reverse, include_restricted=False)
    everything = kb.search(query, top_k=10, include_restricted=False)
    assert reverse.seen == [len(everything)]  # the reranker saw the whole pool, not top_k
    assert [s.chunk_id for s in found] == [everything[-1].chunk_id]


def test_r6_a_failing_reranker_leaves_the_fused_order_and_marks_the_result(
    kb: KnowledgeBase,
) -> None:
    class Broken:
        name = "broken"

        def rerank(self, query: str, results: list) -> list:  # type: ignore[type-arg]
            raise TimeoutError("judge timed out")

    found = kb.search("ACME revenue", top_k=3, rerank=Broken())
    assert [s.chunk_id for s in found] == [s.chunk_id for s in kb.search("ACME revenue", top_k=3)]
    assert found.degraded and found.degraded_reasons == ("broken: judge timed out",)


def test_r1_without_clearance_restricted_chunks_are_never_scored_or_returned(
    kb: KnowledgeBase,
) -> None:
    assert "secret" in {s.doc_id for s in kb.search("ACME forecast 2024", top_k=10)}
    cleared = kb.search("ACME forecast 2024", top_k=10, include_restricted=False)
    assert cleared and "secret" not in {s.doc_id for s in cleared}
    assert not kb.search("internal forecast", doc_ids=["secret"], include_restricted=False)
    kb.add_documents([Document("leak", "ACME forecast 2024 leaked", sensitivity="Restricted")])
    later = kb.search("ACME forecast 2024 leaked", top_k=10, include_restricted=False)
    assert {s.doc_id for s in later}.isdisjoint({"secret", "leak"})  # the cached mask follows


def test_r6_rerank_specs_are_checked(kb: KnowledgeBase) -> None:
    with pytest.raises(InvalidArgumentError, match="unknown reranker"):
        kb.search("ACME", rerank="magic")
    with pytest.raises(InvalidArgumentError, match="top_k"):
        kb.search("ACME", top_k=0, rerank="embedding:deterministic")


def test_r6_a_short_search_is_the_head_of_a_reranking_pool(tmp_path: Path) -> None:
    """The first round does not depend on top_k up to the rerank depth, so a reranker that fails
    leaves exactly the order an un-reranked search gives."""
    words = ["solar", "wind", "coal", "hydro", "grid", "power", "storage", "battery", "price"]
    docs = [Document(f"d{i}", " ".join(words[(i * j) % len(words)] for j in range(1, 9)))
            for i in range(60)]  # fmt: skip
    with KnowledgeBase(tmp_path / "kb", embedding="deterministic") as kb:
        kb.add_documents(docs)
        for query in ("solar power price", "battery storage", "coal demand grid"):
            pool = [s.to_dict() for s in kb.search(query, top_k=30, mode="hybrid")]
            for top_k in (1, 5, 10, 29):
                head = [s.to_dict() for s in kb.search(query, top_k=top_k, mode="hybrid")]
                assert head == pool[:top_k]


def test_r6_a_knowledge_base_that_cannot_be_made_leaves_nothing_behind(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="embedding"):
        KnowledgeBase(tmp_path / "kb", embedding="bogus")
    assert not (tmp_path / "kb").exists()
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidArgumentError, match="stemmer"):
        KnowledgeBase(tmp_path / "empty", stemmer="klingon")
    assert (tmp_path / "empty").is_dir() and not any((tmp_path / "empty").iterdir())


def test_r23_a_lexical_knowledge_base_stays_lexical_under_the_auto_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with KnowledgeBase(tmp_path / "kb", embedding="none") as kb:
        kb.add_documents(DOCS)
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "auto")
    with KnowledgeBase(tmp_path / "kb") as kb:
        assert kb.embedding is None and kb.stats()["vectors"] is None
    with KnowledgeBase(tmp_path / "kb", embedding="deterministic") as kb:  # asked by name
        assert kb.embedding is not None
        assert kb.search("ACME revenue", mode="hybrid")[0].scores["vector"] is not None


@pytest.mark.parametrize("options", [{"include_restricted": False}, {"filters": {"year": 2024}}])
def test_r12_concurrent_rewrites_never_hide_a_document_from_a_masked_search(
    tmp_path: Path, options: dict[str, object]
) -> None:
    """Masks (clearance, filters) are made before ranking; a rewrite whose rows reach the index
    in between must not make the document vanish from the answer."""
    import threading

    def text(n: int) -> str:
        return "\n\n".join(f"Livedoc paragraph {p} of release v{n:03d}. " * 6 for p in range(3))

    with KnowledgeBase(tmp_path / "kb") as kb:
        kb.add_documents([Document(f"o{i}", f"other note {i}", metadata={"year": 2024})
                          for i in range(5)])  # fmt: skip
        kb.add_documents([Document("livedoc", text(0), metadata={"year": 2024})])
        missing: list[int] = []
        done = threading.Event()

        def searcher() -> None:
            while not done.is_set():
                found = kb.search("livedoc paragraph release", top_k=20, **options)  # type: ignore[arg-type]
                missing.extend([1] if not any(s.doc_id == "livedoc" for s in found) else [])

        threads = [threading.Thread(target=searcher) for _ in range(3)]
        for thread in threads:
            thread.start()
        for n in range(1, 60):
            kb.add_documents([Document("livedoc", text(n), metadata={"year": 2024})])
        done.set()
        for thread in threads:
            thread.join()
    assert not missing
