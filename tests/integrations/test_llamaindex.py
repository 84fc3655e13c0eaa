"""The LlamaIndex adapter (R73): lineage on every node, R1, and no network at any point."""

from __future__ import annotations

import asyncio
import importlib
import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from llama_index.core.schema import MetadataMode, NodeWithScore, TextNode

from ragspine import InvalidArgumentError, KnowledgeBase
from ragspine.integrations.llamaindex import RagspineLlamaIndexRetriever
from ragspine.retrieval.link.narrative_link import NarrativeIndexRetriever
from tests.integrations.corpus import CORPUS, MARKER, QUERY

# Imports the adapter and retrieves with the network cut off by an audit hook, and with
# LlamaIndex's NLTK and tiktoken caches pointed at empty directories (a miss there downloads).
OFFLINE_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys

    attempts = []

    def deny_network(event, args):
        if event in ("socket.connect", "socket.getaddrinfo", "socket.gethostbyname"):
            attempts.append(event)
            raise OSError(f"offline: {event}")

    sys.addaudithook(deny_network)
    from llama_index.core.schema import MetadataMode
    from ragspine.integrations.llamaindex import RagspineLlamaIndexRetriever

    with RagspineLlamaIndexRetriever.from_knowledge_base(sys.argv[1], top_k=3) as retriever:
        nodes = retriever.retrieve(sys.argv[2])
        nodes += asyncio.run(retriever.aretrieve(sys.argv[2]))
        texts = [n.node.get_content(metadata_mode=MetadataMode.LLM) for n in nodes]
    ids = [n.node.node_id for n in nodes]
    print(json.dumps({"attempts": attempts, "ids": ids, "rendered": all(texts)}))
    """
)


@pytest.fixture
def retriever(knowledge_base: KnowledgeBase) -> RagspineLlamaIndexRetriever:
    return RagspineLlamaIndexRetriever(NarrativeIndexRetriever(knowledge_base), top_k=3)


def test_nodes_carry_the_citation_lineage_and_scores(
    retriever: RagspineLlamaIndexRetriever,
) -> None:
    nodes = retriever.retrieve(QUERY)
    assert len(nodes) == 3
    assert [n.score for n in nodes] == sorted((n.score for n in nodes), reverse=True)
    for scored in nodes:
        assert isinstance(scored, NodeWithScore)
        node, meta = scored.node, scored.node.metadata
        assert isinstance(node, TextNode)
        assert node.node_id == meta["chunk_id"]
        assert node.ref_doc_id == meta["doc_id"]
        source = next(d.text for d in CORPUS if d.doc_id == meta["doc_id"])
        assert node.start_char_idx is not None
        assert source[node.start_char_idx : node.end_char_idx] == node.text
        assert scored.score == meta["scores"]["fused"]  # no reranker: the fused score
        assert meta["animal"] == meta["metadata"]["animal"]
        assert meta["source_locator"].startswith(meta["doc_id"])
        assert "text" not in meta


def test_a_prompt_sees_the_citation_and_an_embedding_only_the_text(
    retriever: RagspineLlamaIndexRetriever,
) -> None:
    node = retriever.retrieve(QUERY)[0].node
    meta = node.metadata
    assert node.get_content(metadata_mode=MetadataMode.LLM) == (
        f"title: {meta['title']}\nsource_locator: {meta['source_locator']}\n\n{node.get_content()}"
    )
    assert node.get_content(metadata_mode=MetadataMode.EMBED) == node.get_content()


def test_top_k_and_filters(knowledge_base: KnowledgeBase) -> None:
    link = NarrativeIndexRetriever(knowledge_base)
    one = RagspineLlamaIndexRetriever(link, top_k=1)
    assert len(one.retrieve(QUERY)) == 1
    herons = RagspineLlamaIndexRetriever(link, filters={"animal": "heron"})
    assert [n.node.metadata["doc_id"] for n in herons.retrieve("river")] == ["heron"]
    dropped = RagspineLlamaIndexRetriever(link, filters={"animal": "pike"}).retrieve("river")
    assert dropped
    assert all(n.node.metadata["filters_dropped"] is True for n in dropped)  # R4 retry
    with pytest.raises(InvalidArgumentError, match="top_k"):
        RagspineLlamaIndexRetriever(link, top_k=0)


def test_aretrieve_matches_retrieve(retriever: RagspineLlamaIndexRetriever) -> None:
    expected = [n.node.node_id for n in retriever.retrieve(QUERY)]
    assert [n.node.node_id for n in asyncio.run(retriever.aretrieve(QUERY))] == expected


def test_from_knowledge_base_owns_and_closes_what_it_opened(tmp_path: Path) -> None:
    with KnowledgeBase(tmp_path / "kb", embedding="none") as kb:
        kb.add_documents(CORPUS)
    with RagspineLlamaIndexRetriever.from_knowledge_base(tmp_path / "kb", top_k=2) as retriever:
        assert len(retriever.retrieve(QUERY)) == 2
    retriever.close()  # closing twice is harmless
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        retriever.retrieve(QUERY)
    with pytest.raises(InvalidArgumentError, match="top_k"):
        RagspineLlamaIndexRetriever.from_knowledge_base(tmp_path / "kb", top_k=-1)


def test_r1_restricted_never_leaves_the_llamaindex_retriever(
    knowledge_base: KnowledgeBase,
) -> None:
    # The secret is there, and would win: the checks below are not vacuous.
    assert knowledge_base.search(MARKER, top_k=1)[0].doc_id == "secret"
    link = NarrativeIndexRetriever(knowledge_base)

    def leaked(nodes: list[NodeWithScore]) -> bool:
        return any(
            MARKER in n.node.get_content(metadata_mode=MetadataMode.ALL)
            or MARKER in str(n.node.metadata)
            or n.node.ref_doc_id == "secret"
            for n in nodes
        )

    for filters in (None, {"code": MARKER}, {"animal": "vault"}):  # the last two: R4 retry
        adapter = RagspineLlamaIndexRetriever(link, top_k=50, filters=filters)
        for query in (MARKER, QUERY, "secret vault", "river otter den beaver"):
            assert not leaked(adapter.retrieve(query))
            assert not leaked(asyncio.run(adapter.aretrieve(query)))


def test_works_with_the_network_unavailable(
    knowledge_base: KnowledgeBase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NLTK_DATA", str(tmp_path / "nltk"))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken"))
    run = subprocess.run(
        [sys.executable, "-c", OFFLINE_SCRIPT, str(knowledge_base.path), QUERY],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.splitlines()[-1])
    assert result["attempts"] == []
    assert len(result["ids"]) == 6
    assert result["rendered"]
    assert not (tmp_path / "nltk").exists()  # LlamaIndex never even looked for its NLTK data


def test_import_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "ragspine.integrations.llamaindex")
    for name in [n for n in sys.modules if n.split(".")[0] == "llama_index"]:
        monkeypatch.setitem(sys.modules, name, None)  # None: "not installed" to the importer
    with pytest.raises(ImportError, match=r"pip install 'ragspine\[llamaindex\]'"):
        importlib.import_module("ragspine.integrations.llamaindex")
