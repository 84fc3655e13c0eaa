"""The agent link (R70–R73): lineage in every snippet, RESTRICTED never at its exit (R1), filters
dropped only when allowed and then said (R4), numbered citations for prompts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragspine import Document, KnowledgeBase, KnowledgeBaseError
from ragspine.llm import OpenAIChatProvider
from ragspine.retrieval.link.narrative_link import (
    NarrativeIndexRetriever,
    build_narrative_retriever,
    format_context,
)
from ragspine.retrieval.link.snippet import Snippet
from tests.openai_server import openai_server

DOCS = [
    Document("acme-2023", "ACME revenue fell in 2023 because widget demand dropped.",
             title="ACME 2023",
             metadata={"entity": "ACME", "year": 2023, "source_locator": "clash"}),
    Document("acme-2021", "ACME revenue grew in 2021 on strong widget demand.",
             title="ACME 2021", metadata={"entity": "ACME", "year": 2021}),
    Document("secret", "ACME revenue forecast: widget demand collapses in 2024.",
             sensitivity="Restricted", metadata={"entity": "ACME", "year": 2024}),
]  # fmt: skip


@pytest.fixture()
def kb(tmp_path: Path) -> Iterator[KnowledgeBase]:
    with KnowledgeBase(tmp_path / "kb") as knowledge_base:
        knowledge_base.add_documents(DOCS)
        yield knowledge_base


def test_r70_snippets_carry_lineage_metadata_and_every_score(kb: KnowledgeBase) -> None:
    found = NarrativeIndexRetriever(kb).retrieve("why did widget demand drop", top_k=5)
    top = found[0]
    assert top["doc_id"] == "acme-2023" and top["chunk_id"] == "acme-2023#0000"
    assert {"text", "title", "source_locator", "sensitivity"} <= set(top)
    assert top["entity"] == "ACME" and top["year"] == 2023  # metadata at the top level
    assert top["source_locator"].startswith("acme-2023#chars=")
    assert top["metadata"]["source_locator"] == "clash"  # citation fields win a clash
    assert set(top["scores"]) == {"bm25", "vector", "fused", "rerank"}
    assert top["scores"]["rerank"] is None and "filters_dropped" not in top
    assert not found.degraded and not found.filters_dropped


def test_r1_exit_2_drops_restricted_before_any_snippet(kb: KnowledgeBase) -> None:
    assert any(s.doc_id == "secret" for s in kb.search("revenue forecast 2024", top_k=5))
    found = NarrativeIndexRetriever(kb).retrieve("revenue forecast 2024", top_k=5)
    assert found and all(s["doc_id"] != "secret" for s in found)
    assert "collapses" not in json.dumps(list(found))


def test_r4_filters_dropped_once_and_said(kb: KnowledgeBase) -> None:
    retriever = NarrativeIndexRetriever(kb)
    found = retriever.retrieve("widget demand", filters={"year": 2030})
    assert found and found.filters_dropped and all(s["filters_dropped"] for s in found)
    strict = NarrativeIndexRetriever(kb, retry_without_filters=False)
    assert strict.retrieve("widget demand", filters={"year": 2030}) == []
    narrowed = retriever.retrieve("widget demand", filters={"year": {"lte": 2021}})
    assert [s["doc_id"] for s in narrowed] == ["acme-2021"] and not narrowed.filters_dropped
    # RESTRICTED stays out after the retry too
    assert all(s["doc_id"] != "secret" for s in retriever.retrieve("forecast", filters={"x": 1}))


def test_r73_format_context_numbers_citations_and_skips_restricted() -> None:
    snippets = [
        {"title": "A", "source_locator": "a.txt#chars=0-5", "text": "alpha  text",
         "sensitivity": "PUBLIC"},
        {"title": "S", "source_locator": "s.txt", "text": "secret", "sensitivity": "restricted"},
        {"title": "", "source_locator": "b.txt", "text": "beta", "prompt_text": "beta (short)",
         "sensitivity": "PUBLIC"},
    ]  # fmt: skip
    expected = "[1] A · a.txt#chars=0-5\nalpha text\n\n[2] b.txt\nbeta (short)"
    assert format_context(snippets) == expected


def test_r72_build_from_the_store_file_and_judge_with_a_provider(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    def reverse(path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
        count = body["messages"][1]["content"].count("\n[")
        order = list(reversed(range(count + 1)))
        return 200, {"choices": [{"message": {"role": "assistant", "content": str(order)}}]}

    plain = [s["chunk_id"] for s in NarrativeIndexRetriever(kb).retrieve("ACME revenue")]
    with openai_server(reverse) as (url, seen):
        retriever, store = build_narrative_retriever(
            kb.path / "chunks.db", OpenAIChatProvider(url, "judge")
        )
        with store:
            judged = retriever.retrieve("ACME revenue", top_k=2)
    assert [s["chunk_id"] for s in judged] == list(reversed(plain))[: len(judged)]
    assert "collapses" not in json.dumps([r["body"] for r in seen])  # never in a prompt (R1)
    with pytest.raises(KnowledgeBaseError, match="neither"):
        build_narrative_retriever(tmp_path / "nothing")


def test_r70_a_postprocessor_runs_on_open_snippets_only(kb: KnowledgeBase) -> None:
    class Spy:
        def __init__(self) -> None:
            self.seen: list[str] = []

        def process(self, query: str, snippets: list[Snippet], top_k: int) -> list[Snippet]:
            self.seen.extend(s.sensitivity for s in snippets)
            return snippets[:1]

    spy = Spy()
    found = NarrativeIndexRetriever(kb, postprocessor=spy).retrieve("ACME forecast")
    assert len(found) == 1 and spy.seen and "Restricted" not in spy.seen
