"""A knowledge base as a LlamaIndex retriever (R73).

The adapter wraps the agent-facing link, :class:`NarrativeIndexRetriever`, so every node it
yields has already passed the link's RESTRICTED checks (R1). It needs nothing from the network:
it uses neither LlamaIndex's tokenizer (tiktoken) nor its NLTK data, the only parts of
``llama_index.core`` that fetch files, and both are bundled with the package anyway.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

try:
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import (
        NodeRelationship,
        NodeWithScore,
        QueryBundle,
        RelatedNodeInfo,
        TextNode,
    )
except ImportError as exc:  # the extra is optional; say how to get it
    raise ImportError(
        "ragspine.integrations.llamaindex needs llama-index-core: "
        "pip install 'ragspine[llamaindex]'"
    ) from exc

from ragspine.errors import InvalidArgumentError
from ragspine.integrations.ownership import OwnsKnowledgeBase, open_owned
from ragspine.knowledge_base import KnowledgeBase
from ragspine.retrieval.link.narrative_link import (
    NarrativeIndexRetriever,
)

__all__ = ["RagspineLlamaIndexRetriever"]

# What a synthesizer writes above each node's text: the citation, not the lineage and scores.
LLM_METADATA_KEYS = frozenset({"title", "source_locator"})


def _node(snippet: Mapping[str, Any], degraded_reasons: tuple[str, ...]) -> NodeWithScore:
    """A snippet as a scored LlamaIndex node: id, character span and source document
    (``ref_doc_id``) in LlamaIndex's own fields, everything else as metadata. The score is the
    last stage that ranked it: the reranker's, else the fused one."""
    metadata = {key: value for key, value in snippet.items() if key != "text"}
    if degraded_reasons:  # a list has no place for them in LlamaIndex: keep the fallback visible
        metadata["degraded_reasons"] = list(degraded_reasons)
    scores = snippet["scores"]
    node = TextNode(
        id_=snippet["chunk_id"],
        text=snippet["text"],
        metadata=metadata,
        start_char_idx=snippet["char_start"],
        end_char_idx=snippet["char_end"],
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=snippet["doc_id"])},
        excluded_llm_metadata_keys=sorted(set(metadata) - LLM_METADATA_KEYS),
        excluded_embed_metadata_keys=sorted(metadata),
    )
    return NodeWithScore(
        node=node, score=scores["rerank"] if scores["rerank"] is not None else scores["fused"]
    )


class RagspineLlamaIndexRetriever(BaseRetriever, OwnsKnowledgeBase):
    """LlamaIndex ``BaseRetriever`` over a ragspine knowledge base.

    Returns at most ``top_k`` nodes per query, narrowed by ``filters`` (the knowledge base's
    metadata filters). Built with :meth:`from_knowledge_base`, the retriever owns the knowledge
    base it opened: call :meth:`close` (or use it as a context manager) when done. Built around
    an existing ``NarrativeIndexRetriever``, it owns nothing and ``close`` does nothing.
    """

    def __init__(
        self,
        retriever: NarrativeIndexRetriever,
        *,
        top_k: int = 10,
        filters: Mapping[str, Any] | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise InvalidArgumentError(f"top_k must be a positive integer, got {top_k!r}")
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self.retriever = retriever
        self.top_k = top_k
        self.filters = filters
        self._owned: KnowledgeBase | None = None

    @classmethod
    def from_knowledge_base(
        cls,
        path: str | Path,
        *,
        top_k: int = 10,
        filters: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> RagspineLlamaIndexRetriever:
        """Open the knowledge base at ``path`` (its directory or its ``chunks.db``);
        ``options`` go to :func:`build_narrative_retriever` (``provider``, ``reranker``,
        ``mode``, ...). The returned retriever closes the knowledge base in :meth:`close`."""
        return open_owned(lambda link: cls(link, top_k=top_k, filters=filters), path, options)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        found = self.retriever.retrieve(
            query_bundle.query_str, filters=self.filters, top_k=self.top_k
        )
        return [_node(snippet, found.degraded_reasons) for snippet in found]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        # The base class's default runs the search on the event loop; it is CPU and SQLite work.
        return await asyncio.to_thread(self._retrieve, query_bundle)
