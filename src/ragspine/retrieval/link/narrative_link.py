"""The agent-facing link (R70–R73): snippets an LLM or an agent can cite, and nothing RESTRICTED.

This is exit 2 of the RESTRICTED rule (R1): the search is asked without clearance, so RESTRICTED
chunks are excluded before any scoring or reranking, and every snippet is checked once more with
the same :func:`is_restricted` before it is built. What leaves here can go into a prompt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from ragspine.errors import KnowledgeBaseError
from ragspine.knowledge_base import STORE_FILE, KnowledgeBase, is_knowledge_base
from ragspine.llm import LLMProvider
from ragspine.retrieval.hybrid import RERANK_DEPTH
from ragspine.retrieval.link.snippet import ResultList, Snippet
from ragspine.retrieval.postprocess.base import Postprocessor
from ragspine.retrieval.postprocess.factory import make_postprocessor
from ragspine.retrieval.rerank.base import RerankChain, Reranker
from ragspine.retrieval.rerank.listwise_rerank import ListwiseReranker, ProviderListwiseJudge
from ragspine.retrieval.sensitivity import is_restricted
from ragspine.retrieval.vector.embedding_backends import EmbeddingBackend

__all__ = [
    "NarrativeIndexRetriever",
    "ProviderListwiseJudge",
    "build_narrative_retriever",
    "format_context",
    "snippet_dict",
]

SCORE_KEYS = ("bm25", "vector", "fused", "rerank")


class SearchIndex(Protocol):
    """What the link needs of an index: :class:`KnowledgeBase` is one."""

    def search(
        self,
        query: str,
        *,
        top_k: int = ...,
        filters: Mapping[str, Any] | None = ...,
        mode: str | None = ...,
        rerank: str | Reranker | None = ...,
        include_restricted: bool = ...,
    ) -> ResultList[Snippet]: ...


def search_with_retry(
    index: SearchIndex,
    query: str,
    *,
    top_k: int,
    filters: Mapping[str, Any] | None = None,
    doc_ids: Sequence[str] | None = None,
    mode: str | None = None,
    rerank: str | Reranker | None = None,
    include_restricted: bool = False,
    retry_without_filters: bool = True,
) -> ResultList[Snippet]:
    """A search that, when the filters match nothing and a retry is allowed, runs once more
    without them and says so in ``filters_dropped`` (R4); the scope (``doc_ids``) is kept."""

    scope = {} if doc_ids is None else {"doc_ids": doc_ids}  # several bases have no scope

    def run(active: Mapping[str, Any] | None) -> ResultList[Snippet]:
        return index.search(
            query,
            top_k=top_k,
            filters=active,
            mode=mode,
            rerank=rerank,
            include_restricted=include_restricted,
            **scope,
        )

    found = run(filters)
    if found or not filters or not retry_without_filters:
        return found
    retried = run(None)
    return ResultList(
        retried,
        degraded_reasons=found.degraded_reasons + retried.degraded_reasons,
        filters_dropped=True,
    )


def snippet_dict(snippet: Snippet, *, filters_dropped: bool = False) -> dict[str, Any]:
    """A snippet as the link hands it out: the citation fields, every metadata field at the top
    level (citation fields win a clash; all stay under ``metadata``), and every stage's score."""
    core = snippet.to_dict()
    flat = {k: v for k, v in core["metadata"].items() if k not in core}
    scores = {key: snippet.scores.get(key) for key in SCORE_KEYS}
    result = {**flat, **core, "scores": scores}
    if filters_dropped:
        result["filters_dropped"] = True
    return result


class NarrativeIndexRetriever:
    """``retrieve(query, filters=..., top_k=...)`` for agents (R70).

    ``filters`` are the knowledge base's metadata filters (``{"entity": "ACME"}``,
    ``{"year": {"gte": 2020}}``). When they match nothing and ``retry_without_filters`` is on,
    the query runs once more without them and every snippet says ``filters_dropped: true`` (R4).
    """

    def __init__(
        self,
        index: SearchIndex,
        *,
        retry_without_filters: bool = True,
        reranker: str | Reranker | None = None,
        postprocessor: Postprocessor | None = None,
        mode: str | None = None,
    ) -> None:
        self.index = index
        self.retry_without_filters = retry_without_filters
        self.reranker = reranker
        self.postprocessor = postprocessor
        self.mode = mode

    def retrieve(
        self, query: str, *, filters: Mapping[str, Any] | None = None, top_k: int = 50
    ) -> ResultList[dict[str, Any]]:
        # a post-processor chooses the top_k from a deeper pool (MMR needs alternatives)
        depth = top_k if self.postprocessor is None else max(top_k, RERANK_DEPTH)
        found = search_with_retry(
            self.index,
            query,
            top_k=depth,
            filters=filters,
            mode=self.mode,
            rerank=self.reranker,
            include_restricted=False,
            retry_without_filters=self.retry_without_filters,
        )
        dropped = found.filters_dropped
        snippets = [s for s in found if not is_restricted(s.sensitivity)]  # exit 2 (R1)
        if self.postprocessor is not None:
            snippets = self.postprocessor.process(query, snippets, top_k)
        return ResultList(
            (
                snippet_dict(s, filters_dropped=dropped)
                for s in snippets
                if not is_restricted(s.sensitivity)
            ),
            degraded_reasons=found.degraded_reasons,
            filters_dropped=dropped,
        )


def format_context(snippets: Sequence[Mapping[str, Any]]) -> str:
    """The snippets as prompt context with numbered citations ``[1]``, ``[2]``, …; a snippet's
    ``prompt_text`` is used when a post-processor left one, its cited ``text`` otherwise.
    RESTRICTED snippets are never written into a prompt, whoever built the list (R1)."""
    blocks: list[str] = []
    for snippet in snippets:
        if is_restricted(snippet.get("sensitivity")):
            continue
        source = " · ".join(
            str(part) for part in (snippet.get("title"), snippet.get("source_locator")) if part
        )
        body = snippet.get("prompt_text") or snippet.get("text") or ""
        blocks.append(f"[{len(blocks) + 1}] {source}\n{' '.join(str(body).split())}")
    return "\n\n".join(blocks)


def _knowledge_base_dir(chunk_db: str | Path) -> Path:
    path = Path(chunk_db)
    if path.name == STORE_FILE and is_knowledge_base(path.parent):
        return path.parent
    if is_knowledge_base(path):
        return path
    raise KnowledgeBaseError(
        f"{path} is neither a knowledge base nor its {STORE_FILE}; create one with "
        "'ragspine ingest'"
    )


def build_narrative_retriever(
    chunk_db: str | Path,
    provider: LLMProvider | None = None,
    *,
    embedding_backend: EmbeddingBackend | str | None = None,
    reranker: str | Reranker | None = None,
    postprocessor: Postprocessor | str | None = None,
    retry_without_filters: bool = True,
    mode: str | None = None,
) -> tuple[NarrativeIndexRetriever, KnowledgeBase]:
    """The link over an existing knowledge base (its directory or its ``chunks.db``) (R72).

    With a ``provider`` and no ``reranker``, the provider judges the order listwise (R71).
    The caller closes the returned knowledge base.
    """
    if reranker is None and provider is not None:
        reranker = RerankChain([ListwiseReranker(ProviderListwiseJudge(provider))])
    kb = KnowledgeBase(_knowledge_base_dir(chunk_db), create=False, embedding=embedding_backend)
    if postprocessor is None or isinstance(postprocessor, str):
        try:  # a spec (default RAGSPINE_POSTPROCESSOR); MMR compares with the base's own model
            postprocessor = make_postprocessor(postprocessor, embedding=kb.embedding)
        except Exception:
            kb.close()
            raise
    retriever = NarrativeIndexRetriever(
        kb,
        retry_without_filters=retry_without_filters,
        reranker=reranker,
        postprocessor=postprocessor,
        mode=mode,
    )
    return retriever, kb
