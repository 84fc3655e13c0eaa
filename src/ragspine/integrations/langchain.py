"""A knowledge base as a LangChain retriever and agent tool (R73).

The adapter wraps the agent-facing link, :class:`NarrativeIndexRetriever`, so every document it
yields has already passed the link's RESTRICTED checks (R1), and the tool formats its answer
with :func:`format_context`, which checks once more before anything is written into a prompt.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
        Callbacks,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables.config import run_in_executor
    from langchain_core.tools import StructuredTool
except ImportError as exc:  # the extra is optional; say how to get it
    raise ImportError(
        "ragspine.integrations.langchain needs langchain-core: pip install 'ragspine[langchain]'"
    ) from exc
from pydantic import AliasChoices, BaseModel, Field, PrivateAttr

from ragspine.errors import InvalidArgumentError
from ragspine.integrations.ownership import OwnsKnowledgeBase, open_owned
from ragspine.knowledge_base import KnowledgeBase
from ragspine.retrieval.link.narrative_link import (
    NarrativeIndexRetriever,
    format_context,
)

__all__ = ["RagspineRetriever", "as_tool"]

NO_RESULTS = "No passage in the knowledge base matches this query."


def _document(snippet: Mapping[str, Any], degraded_reasons: tuple[str, ...]) -> Document:
    """A snippet as a LangChain document: its text as content, everything else (citation,
    lineage, scores, ``filters_dropped``) as metadata, so nothing the link said is lost."""
    metadata = {key: value for key, value in snippet.items() if key != "text"}
    if degraded_reasons:  # a list has no place for them in LangChain: keep the fallback visible
        metadata["degraded_reasons"] = list(degraded_reasons)
    return Document(page_content=snippet["text"], metadata=metadata, id=snippet["chunk_id"])


class RagspineRetriever(BaseRetriever, OwnsKnowledgeBase):
    """LangChain ``BaseRetriever`` over a ragspine knowledge base.

    ``top_k`` (alias ``k``, LangChain's usual name) and ``filters`` are defaults that
    ``invoke(query, k=..., filters=...)`` overrides per call. Built with
    :meth:`from_knowledge_base`, the retriever owns the knowledge base it opened: call
    :meth:`close` (or use it as a context manager) when done. Built around an existing
    ``NarrativeIndexRetriever``, it owns nothing and ``close`` does nothing.
    """

    retriever: NarrativeIndexRetriever
    top_k: int = Field(default=10, ge=1, validation_alias=AliasChoices("top_k", "k"))
    filters: dict[str, Any] | None = None
    _owned: KnowledgeBase | None = PrivateAttr(default=None)

    @classmethod
    def from_knowledge_base(
        cls,
        path: str | Path,
        *,
        top_k: int = 10,
        filters: dict[str, Any] | None = None,
        **options: Any,
    ) -> RagspineRetriever:
        """Open the knowledge base at ``path`` (its directory or its ``chunks.db``);
        ``options`` go to :func:`build_narrative_retriever` (``provider``, ``reranker``,
        ``mode``, ...). The returned retriever closes the knowledge base in :meth:`close`."""
        return open_owned(
            lambda link: cls(retriever=link, top_k=top_k, filters=filters), path, options
        )

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        top_k: int | None = None,
        filters: Mapping[str, Any] | None = None,
    ) -> list[Document]:
        # Naming k/top_k/filters here (not **kwargs) is what makes BaseRetriever.invoke forward
        # them, and makes a misspelt keyword a TypeError instead of being silently ignored.
        if k is not None and top_k is not None:
            raise InvalidArgumentError("k and top_k are the same setting; pass only one")
        size = next((n for n in (k, top_k) if n is not None), self.top_k)
        found = self.retriever.retrieve(
            query, filters=self.filters if filters is None else filters, top_k=size
        )
        return [_document(snippet, found.degraded_reasons) for snippet in found]

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        top_k: int | None = None,
        filters: Mapping[str, Any] | None = None,
    ) -> list[Document]:
        # The base class's default runs the sync search in an executor too, but drops the
        # per-call arguments; the search itself is CPU and SQLite work, so a thread it is.
        return await run_in_executor(
            None,
            self._get_relevant_documents,
            query,
            run_manager=run_manager.get_sync(),
            k=k,
            top_k=top_k,
            filters=filters,
        )


class _ToolInput(BaseModel):
    query: str = Field(description="What to look for, in the words the documents would use.")


def as_tool(
    retriever: RagspineRetriever,
    *,
    name: str = "search_knowledge_base",
    description: str = (
        "Search the knowledge base. Returns numbered passages [1], [2], ... with their source; "
        "cite them by number."
    ),
) -> StructuredTool:
    """An agent tool whose answer is :func:`format_context`'s numbered citations.

    The tool's artifact is the list of documents, so a caller can map ``[n]`` back to a chunk
    (LangChain's ``content_and_artifact`` format). A module function rather than a method:
    ``Runnable.as_tool`` already exists on every retriever and means something else.
    """

    def render(documents: list[Document]) -> tuple[str, list[Document]]:
        context = format_context([{**d.metadata, "text": d.page_content} for d in documents])
        return context or NO_RESULTS, documents

    def search(query: str, callbacks: Callbacks = None) -> tuple[str, list[Document]]:
        return render(retriever.invoke(query, config={"callbacks": callbacks}))

    async def asearch(query: str, callbacks: Callbacks = None) -> tuple[str, list[Document]]:
        return render(await retriever.ainvoke(query, config={"callbacks": callbacks}))

    return StructuredTool(
        name=name,
        description=description,
        func=search,
        coroutine=asearch,
        args_schema=_ToolInput,
        response_format="content_and_artifact",
    )
