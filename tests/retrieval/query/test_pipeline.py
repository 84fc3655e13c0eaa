"""The query pipeline against a real local OpenAI-API server: every transform, decomposition,
adaptive routing, the corrective loop, the gate, visible degradation and determinism."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragspine import Document, KnowledgeBase
from ragspine.errors import InvalidArgumentError
from ragspine.llm import OpenAIChatProvider
from ragspine.retrieval.query import CorrectiveGrade, QueryPipeline, SafetyGate, make_query_pipeline
from tests.openai_server import openai_server

DOCS = [
    Document("solar", "Solar panels turn sunlight into electricity on rooftops.",
             metadata={"year": 2021}),
    Document("wind", "Wind turbines spin in offshore farms to make power.",
             metadata={"year": 2022}),
    Document("hydro", "Dams store water and release it through turbines.", metadata={"year": 2020}),
    Document("coal", "Coal plants burn coal and emit carbon dioxide.", metadata={"year": 2019}),
    Document("memo", "Internal memo: wind farm secret bid zqxmarker.", sensitivity="RESTRICTED"),
]  # fmt: skip
ANSWERS = {
    "Rewrite the question into": json.dumps(["offshore wind turbines", "wind power farms"]),
    "Write a short passage": "Wind turbines in offshore farms turn moving air into power.",
    "Rewrite the question as a more general": "How is electricity generated?",
    "Break the question": json.dumps({"sub_questions": [
        {"question": "How do solar panels work?", "reasoning": "first part"},
        {"question": "How do wind turbines work?", "reasoning": "second part"},
        {"question": "What does Globex charge?", "reasoning": "pricing"}]}),
    "Does answering": "complex",
}  # fmt: skip


def scripted(path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
    system = body["messages"][0]["content"]
    text = next((a for k, a in ANSWERS.items() if system.startswith(k)), "?")
    return 200, {"choices": [{"message": {"role": "assistant", "content": text}}]}


@pytest.fixture()
def kb(tmp_path: Path) -> Iterator[KnowledgeBase]:
    with KnowledgeBase(tmp_path / "kb") as knowledge_base:
        knowledge_base.add_documents(DOCS)
        yield knowledge_base


@pytest.fixture()
def llm() -> Iterator[tuple[OpenAIChatProvider, list[dict[str, Any]]]]:
    with openai_server(scripted) as (url, seen):
        yield OpenAIChatProvider(url, "m", timeout=5, backoff=0), seen


def prompts(seen: list[dict[str, Any]]) -> str:
    return json.dumps([r["body"]["messages"] for r in seen])


def test_r5_nothing_configured_means_no_pipeline(kb: KnowledgeBase) -> None:
    assert make_query_pipeline(kb) is None


@pytest.mark.parametrize("transform", ["multi_query", "rag_fusion", "hyde", "step_back"])
def test_r41_each_transform_adds_probes_and_keeps_the_question_first(
    kb: KnowledgeBase, llm: tuple[OpenAIChatProvider, list[dict[str, Any]]], transform: str
) -> None:
    provider, seen = llm
    pipeline = QueryPipeline(kb, provider=provider, transform=transform)
    found = pipeline.search("wind", top_k=3, include_restricted=False)
    assert found.queries[0] == "wind" and len(found.queries) >= 2 and not found.degraded
    assert found and all(s.doc_id != "memo" for s in found)
    assert "zqxmarker" not in prompts(seen) and "Solar panels" not in prompts(seen)  # R1
    if transform == "hyde":  # the hypothetical passage is a probe, never a result
        assert all("moving air" not in s.text for s in found)


def test_r41_rag_fusion_scores_are_rrf_and_multi_query_keeps_the_best(
    kb: KnowledgeBase, llm: tuple[OpenAIChatProvider, list[dict[str, Any]]]
) -> None:
    provider, _ = llm
    fusion = QueryPipeline(kb, provider=provider, transform="rag_fusion").search("wind")
    assert 2 / 61 < (fusion[0].scores["fused"] or 0) <= 3 / 61  # RRF over three queries
    best = QueryPipeline(kb, provider=provider, transform="multi_query").search("wind")
    assert best[0].scores["fused"] == pytest.approx(1 / 61)  # its best single-list score


def test_r42_decomposition_runs_each_sub_question_and_gates_them(
    kb: KnowledgeBase, llm: tuple[OpenAIChatProvider, list[dict[str, Any]]]
) -> None:
    provider, _ = llm
    pipeline = QueryPipeline(kb, provider=provider, decompose=True, gate=SafetyGate(["Globex"]))
    found = pipeline.search("Compare solar and wind power", top_k=4)
    assert found.queries == ("How do solar panels work?", "How do wind turbines work?")
    assert found.rejected_queries == ("What does Globex charge?",)
    assert {"solar", "wind"} <= {s.doc_id for s in found}


def test_r43_adaptive_decomposes_only_complex_questions(
    kb: KnowledgeBase, llm: tuple[OpenAIChatProvider, list[dict[str, Any]]]
) -> None:
    provider, seen = llm
    pipeline = QueryPipeline(kb, provider=provider, adaptive="heuristic")
    assert pipeline.search("solar panels").queries == ("solar panels",) and not seen
    assert len(pipeline.search("compare solar and wind").queries) == 3  # the sub-questions
    by_model = QueryPipeline(kb, provider=provider, adaptive="llm").search("solar panels")
    assert len(by_model.queries) == 3  # the scripted model calls everything complex


def test_r44_corrective_drops_filters_then_rewrites_then_refuses(
    kb: KnowledgeBase, llm: tuple[OpenAIChatProvider, list[dict[str, Any]]]
) -> None:
    provider, _ = llm
    lenient = CorrectiveGrade(min_bm25=0.1)  # five documents: BM25 scores stay small
    pipeline = QueryPipeline(kb, corrective=True, provider=provider, grade=lenient)
    kept = pipeline.search("wind turbines offshore", filters={"year": 1990})
    assert kept and kept.filters_dropped and kept.refused is None
    strict = pipeline.search("wind turbines", filters={"year": 1990}, retry_without_filters=False)
    assert strict.refused is not None and not strict and not strict.filters_dropped
    picky = QueryPipeline(kb, corrective=True, provider=provider, grade=CorrectiveGrade(99, 2))
    refused = picky.search("wind")
    assert list(refused) == [] and "2 corrective rounds" in (refused.refused or "")
    assert "offshore wind turbines" in refused.queries  # the rewrite round ran


def test_r6_a_failing_model_degrades_and_the_question_still_runs(kb: KnowledgeBase) -> None:
    with openai_server(lambda *_: (500, "down")) as (url, _):
        provider = OpenAIChatProvider(url, "m", timeout=2, max_retries=0)
        for options in ({"transform": "hyde"}, {"decompose": True}, {"adaptive": "llm"}):
            found = QueryPipeline(kb, provider=provider, **options).search("wind power")  # type: ignore[arg-type]
            assert found and found.degraded and found.queries == ("wind power",)
    with openai_server(lambda *_: (200, {"choices": [{"message": {"content": "no"}}]})) as (
        url,
        _,
    ):
        garbage = OpenAIChatProvider(url, "m")
        found = QueryPipeline(kb, provider=garbage, transform="multi_query").search("wind")
        assert found and "multi_query" in found.degraded_reasons[0]


def test_r3_the_same_answers_give_byte_identical_results(
    kb: KnowledgeBase, llm: tuple[OpenAIChatProvider, list[dict[str, Any]]]
) -> None:
    provider, _ = llm
    runs = [
        [s.to_dict() for s in QueryPipeline(kb, provider=provider, decompose=True,
                                            transform="rag_fusion").search("solar and wind")]
        for _ in range(3)
    ]  # fmt: skip
    assert runs[0] == runs[1] == runs[2] and runs[0]


def test_r92_configuration_from_the_environment(
    kb: KnowledgeBase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGSPINE_QUERY_TRANSFORM", "hyde")
    with pytest.raises(InvalidArgumentError, match="RAGSPINE_LLM_BASE_URL"):
        make_query_pipeline(kb)
    monkeypatch.setenv("RAGSPINE_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("RAGSPINE_LLM_MODEL", "m")
    pipeline = make_query_pipeline(kb)
    assert pipeline is not None and pipeline.transform == "hyde"
    monkeypatch.setenv("RAGSPINE_QUERY_TRANSFORM", "telepathy")
    with pytest.raises(InvalidArgumentError, match="telepathy"):
        make_query_pipeline(kb)
