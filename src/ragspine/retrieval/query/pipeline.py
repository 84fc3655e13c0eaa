"""The guarded query pipeline: rewrite → gate → retrieve each query → fuse, with optional
decomposition, adaptive routing and a bounded corrective loop (R40–R45).

Everything is off by default (R5): with no transform configured, ``search`` is exactly the
index's own search. Transforms that ask a model degrade visibly when it fails — the original
query still runs and the result says why (R6). Generated queries (rewrites, HyDE passages,
step-back and sub-questions) pass the safety gate before any retrieval (R45); the user's own
query is not a generated one. Merging is deterministic: the same model answers give the same
list, byte for byte (ties by ``(-score, library, chunk_id)``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from ragspine.errors import InvalidArgumentError
from ragspine.llm import LLMError, LLMProvider
from ragspine.retrieval.filters import MetadataFilter, parse_filters
from ragspine.retrieval.hybrid import RERANK_DEPTH
from ragspine.retrieval.link.snippet import ResultList, Snippet
from ragspine.retrieval.multi_index import Found, Scored, fuse_rrf, rank_key
from ragspine.retrieval.query.gate import SafetyGate
from ragspine.retrieval.query.glossary import GlossaryQueryRewriter, first_of_each
from ragspine.retrieval.query.transforms import (
    TRANSFORMS,
    decompose,
    hypothetical_document,
    is_complex,
    is_complex_by_model,
    multi_query,
    step_back,
)
from ragspine.retrieval.rerank.base import Reranker

log = logging.getLogger(__name__)

MAX_CORRECTIVE_ROUNDS = 2


class QueryIndex(Protocol):
    """A knowledge base, or several behind a ``MultiIndexRetriever``."""

    def search(
        self,
        query: str,
        *,
        top_k: int = ...,
        filters: Mapping[str, Any] | MetadataFilter | None = ...,
        mode: str | None = ...,
        rerank: str | Reranker | None = ...,
        include_restricted: bool = ...,
    ) -> ResultList[Snippet]: ...


@dataclass(frozen=True)
class CorrectiveGrade:
    """When retrieved context is too weak to answer from (R44): nothing found, or the best
    lexical score and the best vector similarity both under their floors."""

    min_bm25: float = 2.0
    min_vector: float = 0.35

    def weak(self, results: Sequence[Snippet]) -> str | None:
        if not results:
            return "nothing was found"
        best_bm25 = max((s.scores.get("bm25") or 0.0 for s in results), default=0.0)
        best_vector = max((s.scores.get("vector") or 0.0 for s in results), default=0.0)
        if best_bm25 < self.min_bm25 and best_vector < self.min_vector:
            return (
                f"best BM25 {best_bm25:.2f} < {self.min_bm25} and best vector similarity "
                f"{best_vector:.2f} < {self.min_vector}"
            )
        return None


@dataclass
class _Run:
    """What one pass produced, and what it learned on the way."""

    queries: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)


def fuse_results(lists: Sequence[Sequence[Snippet]], top_k: int, how: str = "rrf") -> list[Snippet]:
    """One ranking from several: RRF over the lists (``how="rrf"``), or each snippet's best
    ``fused`` score in any list (``"max"``); keyed and tie-broken as across knowledge bases."""
    if len(lists) == 1:
        return list(lists[0][:top_k])
    found = [[(s.library_id or "", s) for s in results] for results in lists]
    scored = fuse_rrf(found) if how == "rrf" else _best_of(found)
    return [s.with_scores(fused=score) for score, _, s in sorted(scored, key=rank_key)[:top_k]]


def _best_of(lists: Sequence[Sequence[Found]]) -> list[Scored]:
    best: dict[tuple[str, str], Scored] = {}
    for found in lists:
        for name, snippet in found:
            scored = (snippet.scores.get("fused") or 0.0, name, snippet)
            held = best.get((name, snippet.chunk_id))
            if held is None or scored[0] > held[0]:
                best[(name, snippet.chunk_id)] = scored
    return list(best.values())


class QueryPipeline:
    """``search(query, ...)`` over ``index`` with the configured transforms.

    ``transform``: ``multi_query`` (the question and ``num_queries - 1`` model rewrites, each
    snippet keeping its best score), ``rag_fusion`` (the same queries, fused by RRF), ``hyde``
    (the question and a hypothetical answer as a second probe, RRF) or ``step_back`` (the
    question and a more general one, RRF). ``rewriter``: deterministic glossary rewrites (RRF).
    ``decompose``: sub-questions, each through the whole pipeline, merged by RRF; ``adaptive``
    (``"heuristic"`` or ``"llm"``) decomposes only complex questions. ``corrective``: a grade →
    act loop of at most two rounds — drop the filters (when ``retry_without_filters``), then
    rewrite, then refuse (an empty result with ``refused`` set).
    """

    def __init__(
        self,
        index: QueryIndex,
        *,
        provider: LLMProvider | None = None,
        transform: str | None = None,
        decompose: bool = False,
        adaptive: str | None = None,
        corrective: bool = False,
        rewriter: GlossaryQueryRewriter | None = None,
        gate: SafetyGate | None = None,
        num_queries: int = 3,
        grade: CorrectiveGrade | None = None,
        max_workers: int = 4,
    ) -> None:
        if transform is not None and transform not in TRANSFORMS:
            raise InvalidArgumentError(
                f"unknown query transform {transform!r}; use one of {', '.join(TRANSFORMS)}"
            )
        if adaptive not in (None, "heuristic", "llm"):
            raise InvalidArgumentError(f"adaptive must be 'heuristic' or 'llm', got {adaptive!r}")
        needs_model = transform is not None or decompose or adaptive == "llm"
        if needs_model and provider is None:
            raise InvalidArgumentError(
                "query transforms and decomposition need a chat model: set RAGSPINE_LLM_BASE_URL "
                "and RAGSPINE_LLM_MODEL, or pass provider="
            )
        if num_queries < 1:
            raise InvalidArgumentError(f"num_queries must be >= 1, got {num_queries}")
        self.index = index
        self.provider = provider
        self.transform = transform
        self.decompose = decompose
        self.adaptive = adaptive
        self.corrective = corrective
        self.rewriter = rewriter
        self.gate = gate or SafetyGate()
        self.num_queries = num_queries
        self.grade = grade or CorrectiveGrade()
        self._pool = ThreadPoolExecutor(max_workers, thread_name_prefix="ragspine-query")

    def close(self) -> None:
        self._pool.shutdown(wait=False)

    # ----------------------------------------------------------------- planning
    def _model(self) -> LLMProvider:
        assert self.provider is not None  # checked in __init__ for every path that asks
        return self.provider

    def _questions(self, query: str, run: _Run) -> list[str]:
        """The question itself, or its sub-questions (gated) when it is decomposed."""
        wanted = self.decompose and self.adaptive is None
        if self.adaptive is not None:
            try:
                wanted = (
                    is_complex_by_model(self._model(), query)
                    if self.adaptive == "llm"
                    else is_complex(query)
                )
            except LLMError as exc:
                run.degraded.append(f"adaptive: {exc}")
                wanted = is_complex(query)
        if not wanted or self.provider is None:
            return [query]
        try:
            subs = [s.question for s in decompose(self._model(), query)]
        except LLMError as exc:
            run.degraded.append(f"decomposition: {exc}")
            return [query]
        verdict = self.gate.check(subs)
        run.rejected.extend(verdict.rejected)
        return list(verdict.allowed) or [query]

    def _probes(self, question: str, run: _Run, *, rewrite: bool = False) -> list[str]:
        """The queries that retrieve for one question: it, then its gated rewrites."""
        generated: list[str] = []
        if self.rewriter is not None:
            generated += self.rewriter.rewrite(question)[1:]
        transform = "multi_query" if rewrite and self.transform is None else self.transform
        try:
            if transform in ("multi_query", "rag_fusion"):
                generated += multi_query(self._model(), question, self.num_queries)[1:]
            elif transform == "hyde":
                generated.append(hypothetical_document(self._model(), question))
            elif transform == "step_back":
                generated.append(step_back(self._model(), question))
        except LLMError as exc:
            run.degraded.append(f"{transform}: {exc}")
        verdict = self.gate.check(first_of_each([question, *generated])[1:])
        run.rejected.extend(verdict.rejected)
        return [question, *verdict.allowed]

    # ---------------------------------------------------------------- retrieval
    def _retrieve(
        self, probes: Sequence[str], options: dict[str, Any], depth: int
    ) -> list[ResultList[Snippet]]:
        searches = [
            self._pool.submit(self.index.search, probe, top_k=depth, **options) for probe in probes
        ]
        return [future.result() for future in searches]

    def _pass(
        self,
        query: str,
        top_k: int,
        options: dict[str, Any],
        run: _Run,
        *,
        rewrite: bool = False,
    ) -> list[Snippet]:
        questions = self._questions(query, run)
        depth = max(top_k, RERANK_DEPTH)
        merged = []
        for question in questions:
            probes = self._probes(question, run, rewrite=rewrite)
            run.queries.extend(probes)
            lists = self._retrieve(probes, options, depth)
            for results in lists:
                run.degraded.extend(results.degraded_reasons)
            how = "max" if self.transform == "multi_query" and not rewrite else "rrf"
            merged.append(fuse_results(lists, depth, how))
        return fuse_results(merged, top_k)

    def search(
        self,
        query: str,
        *,
        top_k: int = 10,
        filters: Mapping[str, Any] | MetadataFilter | None = None,
        mode: str | None = None,
        rerank: str | Reranker | None = None,
        include_restricted: bool = True,
        retry_without_filters: bool = True,
        doc_ids: Sequence[str] | None = None,
    ) -> ResultList[Snippet]:
        options: dict[str, Any] = {"filters": filters, "mode": mode, "rerank": rerank,
                                   "include_restricted": include_restricted}  # fmt: skip
        if doc_ids is not None:  # a scope only a single knowledge base understands
            options["doc_ids"] = doc_ids
        run = _Run()
        results = self._pass(query, top_k, options, run)
        dropped, refused = False, None
        filtered = bool(parse_filters(filters).conditions)
        for round_number in range(MAX_CORRECTIVE_ROUNDS + 1 if self.corrective else 0):
            weak = self.grade.weak(results)
            if weak is None:
                break
            if round_number == MAX_CORRECTIVE_ROUNDS:
                refused = f"weak context after {MAX_CORRECTIVE_ROUNDS} corrective rounds: {weak}"
                log.info("corrective loop refused: %s", refused)
                results = []
            elif filtered and retry_without_filters and not dropped:
                options = {**options, "filters": None}
                dropped = True
                results = self._pass(query, top_k, options, run)
            elif self.provider is not None or self.rewriter is not None:
                results = self._pass(query, top_k, options, run, rewrite=self.provider is not None)
            else:
                refused = f"weak context and nothing left to try: {weak}"
                results = []
                break
        return ResultList(
            results,
            degraded_reasons=first_of_each(run.degraded),
            filters_dropped=dropped,
            queries=first_of_each(run.queries),
            rejected_queries=first_of_each(run.rejected),
            refused=refused,
        )
