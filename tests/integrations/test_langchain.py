"""The LangChain adapter (R73): LangChain's own standard retriever suite, lineage, and R1."""

from __future__ import annotations

import asyncio
import importlib
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document as LCDocument
from langchain_core.messages import ToolMessage
from langchain_core.retrievers import BaseRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests

from ragspine import InvalidArgumentError, KnowledgeBase
from ragspine.integrations.langchain import NO_RESULTS, RagspineRetriever, as_tool
from ragspine.retrieval.link.narrative_link import NarrativeIndexRetriever
from tests.integrations.corpus import CORPUS, MARKER, QUERY


@pytest.fixture
def retriever(knowledge_base: KnowledgeBase) -> RagspineRetriever:
    return RagspineRetriever(retriever=NarrativeIndexRetriever(knowledge_base))


@pytest.fixture
def anyio_backend() -> str:
    """LangChain runs a sync retriever's ``ainvoke`` on an asyncio executor: no trio."""
    return "asyncio"


class TestRagspineRetrieverStandard(RetrieversIntegrationTests):
    """LangChain's standard retriever tests, with ``k`` as the number-of-results argument."""

    # The suite's one async test carries no marker, and pytest-asyncio runs in strict mode
    # here; anyio's plugin runs marked coroutines and leaves the sync tests alone.
    pytestmark = pytest.mark.anyio
    narrative: NarrativeIndexRetriever

    @pytest.fixture(autouse=True, scope="class")
    @classmethod
    def _narrative(cls, knowledge_base: KnowledgeBase) -> None:
        # The suite builds the retriever from properties, which cannot take fixtures.
        cls.narrative = NarrativeIndexRetriever(knowledge_base)

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return RagspineRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"retriever": self.narrative}

    @property
    def retriever_query_example(self) -> str:
        return QUERY


class TestRagspineRetrieverStandardTopK(TestRagspineRetrieverStandard):
    """The same suite with ``top_k``, ragspine's own name, which the adapter also accepts."""

    @property
    def num_results_arg_name(self) -> str:
        return "top_k"


def test_documents_carry_the_citation_lineage_and_scores(retriever: RagspineRetriever) -> None:
    documents = retriever.invoke(QUERY, k=3)
    assert len(documents) == 3
    for document in documents:
        meta = document.metadata
        assert document.id == meta["chunk_id"]
        assert meta["chunk_id"].startswith(f"{meta['doc_id']}#")
        assert meta["source_locator"].startswith(meta["doc_id"])
        assert document.page_content in next(d.text for d in CORPUS if d.doc_id == meta["doc_id"])
        assert set(meta["scores"]) == {"bm25", "vector", "fused", "rerank"}
        assert meta["scores"]["fused"] is not None
        assert meta["animal"] == meta["metadata"]["animal"]  # metadata also at the top level
        assert meta["sensitivity"] == "PUBLIC"
        assert "text" not in meta
        assert "filters_dropped" not in meta


def test_filters_are_a_default_that_a_call_can_replace(knowledge_base: KnowledgeBase) -> None:
    beavers = RagspineRetriever(
        retriever=NarrativeIndexRetriever(knowledge_base), filters={"animal": "beaver"}
    )
    assert {d.metadata["animal"] for d in beavers.invoke("river")} == {"beaver"}
    assert {d.metadata["animal"] for d in beavers.invoke("river", filters={"animal": "heron"})} == {
        "heron"
    }
    dropped = beavers.invoke("river", filters={"animal": "pike"})  # matches nothing: R4 retry
    assert dropped
    assert all(d.metadata["filters_dropped"] is True for d in dropped)


def test_k_and_top_k_in_one_call_is_an_error(retriever: RagspineRetriever) -> None:
    with pytest.raises(InvalidArgumentError, match="only one"):
        retriever.invoke(QUERY, k=1, top_k=2)


def test_a_misspelt_call_argument_is_not_ignored(retriever: RagspineRetriever) -> None:
    with pytest.raises(TypeError, match="topk"):
        retriever.invoke(QUERY, topk=1)


def test_ainvoke_forwards_the_call_arguments(retriever: RagspineRetriever) -> None:
    documents = asyncio.run(retriever.ainvoke("beaver", k=2, filters={"animal": "beaver"}))
    assert len(documents) == 2
    assert {d.metadata["animal"] for d in documents} == {"beaver"}


def test_from_knowledge_base_owns_and_closes_what_it_opened(tmp_path: Path) -> None:
    with KnowledgeBase(tmp_path / "kb", embedding="none") as kb:
        kb.add_documents(CORPUS)
    with RagspineRetriever.from_knowledge_base(tmp_path / "kb" / "chunks.db", top_k=2) as retriever:
        assert len(retriever.invoke(QUERY)) == 2
    retriever.close()  # closing twice is harmless
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        retriever.invoke(QUERY)


def test_from_knowledge_base_closes_it_when_the_options_are_wrong(tmp_path: Path) -> None:
    with KnowledgeBase(tmp_path / "kb", embedding="none") as kb:
        kb.add_documents(CORPUS[:2])
    with pytest.raises(ValueError, match="top_k"):
        RagspineRetriever.from_knowledge_base(tmp_path / "kb", top_k=0)


def test_closing_a_wrapper_leaves_the_callers_knowledge_base_open(
    knowledge_base: KnowledgeBase,
) -> None:
    RagspineRetriever(retriever=NarrativeIndexRetriever(knowledge_base)).close()
    assert knowledge_base.search(QUERY, top_k=1)


def test_the_tool_answers_with_numbered_citations(retriever: RagspineRetriever) -> None:
    tool = as_tool(retriever.model_copy(update={"top_k": 3}))
    text = tool.invoke(QUERY)
    assert text.startswith("[1] ")
    assert "[3] " in text
    assert "[4] " not in text
    call = {"type": "tool_call", "id": "c1", "name": tool.name, "args": {"query": QUERY}}
    message = tool.invoke(call)
    assert isinstance(message, ToolMessage)
    assert message.content == text
    first = message.artifact[0]
    assert isinstance(first, LCDocument)
    assert f"[1] {first.metadata['title']} · {first.metadata['source_locator']}\n" in text
    assert asyncio.run(tool.ainvoke("zebra giraffe")) == NO_RESULTS


def test_r1_restricted_never_leaves_the_langchain_retriever(
    knowledge_base: KnowledgeBase, retriever: RagspineRetriever
) -> None:
    # The secret is there, and would win: the checks below are not vacuous.
    assert knowledge_base.search(MARKER, top_k=1)[0].doc_id == "secret"

    def leaked(documents: list[LCDocument]) -> bool:
        return any(
            MARKER in d.page_content
            or MARKER in str(d.metadata)
            or d.metadata["doc_id"] == "secret"
            for d in documents
        )

    for query in (MARKER, QUERY, "secret vault", "river otter den beaver"):
        assert not leaked(retriever.invoke(query, k=50))
        assert not leaked(asyncio.run(retriever.ainvoke(query, k=50)))
        # filters that only the secret matches: the retry without filters must not find it
        assert not leaked(retriever.invoke(query, k=50, filters={"code": MARKER}))
        assert not leaked(retriever.invoke(query, k=50, filters={"animal": "vault"}))
        assert MARKER not in as_tool(retriever).invoke(query)


def test_import_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "ragspine.integrations.langchain")
    for name in [n for n in sys.modules if n.split(".")[0] == "langchain_core"]:
        monkeypatch.setitem(sys.modules, name, None)  # None: "not installed" to the importer
    with pytest.raises(ImportError, match=r"pip install 'ragspine\[langchain\]'"):
        importlib.import_module("ragspine.integrations.langchain")
