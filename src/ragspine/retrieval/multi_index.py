"""Several knowledge bases searched as one (R31).

A router picks the bases a query needs; every (query, base) pair then runs at once in a bounded
thread pool, so sub-questions × bases cost about one search, not their sum; the per-pair rankings
are fused into one list whose snippets say which base they came from (``library_id``).

Routing is an optimisation, never a point of failure (R6): a router that raises, answers garbage
or names no configured base means every base is searched, and the result says so
(``routing_fallback`` and a degraded reason). A router sees the query and the bases' names and
descriptions only, never chunk text, so no RESTRICTED text can reach a routing model (R1).

The merged list depends only on the inputs, never on thread timing (R3): per-pair rankings are
fused in (query, base) order and ties are broken by ``(-score, library_id, chunk_id)``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

from ragspine.errors import InvalidArgumentError
from ragspine.llm import LLMProvider, json_list
from ragspine.retrieval.filters import parse_filters
from ragspine.retrieval.lexical.fusion import rrf_fuse
from ragspine.retrieval.lexical.tokenizer import has_cjk
from ragspine.retrieval.link.narrative_link import SearchIndex
from ragspine.retrieval.link.snippet import ResultList, Snippet
from ragspine.retrieval.rerank.base import Reranker
from ragspine.retrieval.rerank.listwise_rerank import passages_prompt
from ragspine.retrieval.sensitivity import RESTRICTED_SENSITIVITY, is_restricted

__all__ = [
    "FUSIONS",
    "KeywordRouter",
    "LLMRouter",
    "MultiIndexRetriever",
    "Router",
    "StaticRouter",
]

FUSIONS = ("rrf", "content_max")

ROUTER_INSTRUCTIONS = (
    "You choose which knowledge bases to search for a query. Each passage below describes one "
    "knowledge base as 'name: description'. Reply with a JSON list of the names of the knowledge "
    'bases worth searching, such as ["hr", "finance"].'
)


@runtime_checkable
class Router(Protocol):
    def route(self, query: str, names: Sequence[str]) -> list[str]:
        """The names (among ``names``) of the bases worth searching for ``query``."""
        ...


class StaticRouter:
    """Always the same bases: for callers that know where to look."""

    def __init__(self, names: Sequence[str]) -> None:
        if isinstance(names, str):
            raise InvalidArgumentError(f"names must be a list of base names, got {names!r}")
        self.names = tuple(names)

    def route(self, query: str, names: Sequence[str]) -> list[str]:
        return [name for name in names if name in self.names]


class KeywordRouter:
    """A base is chosen when the lower-cased query holds one of its keywords: as a whole word
    for ASCII keywords (``hr`` does not match ``three``), as a substring for CJK ones (Chinese
    has no spaces to mark words). No keyword matched means every base: silence is no reason to
    search nothing."""

    def __init__(self, keywords: Mapping[str, Sequence[str]]) -> None:
        self.keywords = {name: _keyword_list(name, words) for name, words in keywords.items()}
        self._patterns = {
            name: [
                re.compile(
                    re.escape(word)
                    if has_cjk(word)
                    else rf"(?<![a-z0-9]){re.escape(word)}(?![a-z0-9])"
                )
                for word in words
            ]
            for name, words in self.keywords.items()
        }

    def route(self, query: str, names: Sequence[str]) -> list[str]:
        lowered = query.lower()
        chosen = [
            name for name in names if any(p.search(lowered) for p in self._patterns.get(name, ()))
        ]
        return chosen or list(names)


def _keyword_list(name: str, words: Sequence[str]) -> tuple[str, ...]:
    if isinstance(words, str) or not all(isinstance(w, str) and w.strip() for w in words):
        raise InvalidArgumentError(
            f"keywords of {name!r} must be a list of non-empty strings, got {words!r}"
        )
    return tuple(w.strip().lower() for w in words)


class LLMRouter:
    """Asks a chat model (temperature 0) which bases to search, showing it the query and each
    base's name and description only. Names it gives that are not configured are ignored; an
    unreadable answer or a model failure raises, and the retriever falls back (R6)."""

    def __init__(
        self, provider: LLMProvider, descriptions: Mapping[str, str] | None = None
    ) -> None:
        self.provider = provider
        self.descriptions = dict(descriptions or {})

    def route(self, query: str, names: Sequence[str]) -> list[str]:
        described = [
            f"{name}: {self.descriptions[name]}" if name in self.descriptions else name
            for name in names
        ]
        answer = self.provider.chat(
            passages_prompt(ROUTER_INSTRUCTIONS, query, described), temperature=0
        )
        wanted = {n.strip() for n in json_list(answer) if isinstance(n, str)}
        return [name for name in names if name in wanted]


def _declared_names(router: Router | None) -> tuple[str, ...]:
    """The base names a router's configuration mentions, so a typo fails at construction."""
    if isinstance(router, StaticRouter):
        return router.names
    if isinstance(router, KeywordRouter):
        return tuple(router.keywords)
    if isinstance(router, LLMRouter):
        return tuple(router.descriptions)
    return ()


Found = tuple[str, Snippet]  # (base name, the snippet as that base returned it)
Scored = tuple[float, str, Snippet]  # (fused score, base name, snippet)


def rank_key(item: Scored) -> tuple[float, str, str]:
    """Best first; ties by base name, then chunk id: the one order every fusion ends in (R3)."""
    score, name, snippet = item
    return (-score, name, snippet.chunk_id)


def fuse_rrf(lists: Sequence[Sequence[Found]]) -> list[Scored]:
    """RRF over the per-pair rankings, keyed by (library_id, chunk_id). A chunk found by several
    queries keeps the bm25/vector scores of the first query (in the order given) that found it."""
    ids: dict[tuple[str, str], str] = {}
    first: dict[str, Found] = {}
    rankings: list[list[str]] = []
    for found in lists:
        ranking = []
        for name, snippet in found:
            key = ids.setdefault((name, snippet.chunk_id), str(len(ids)))
            first.setdefault(key, (name, snippet))
            ranking.append(key)
        rankings.append(ranking)
    fused = rrf_fuse(rankings)
    return [(fused[key], name, snippet) for key, (name, snippet) in first.items()]


def _fuse_content_max(lists: Sequence[Sequence[Found]]) -> list[Scored]:
    """AutoFlow's simple fusion: identical text is one result, scored by the highest ``fused``
    score it came with. The copy that stands for it is the first by ``(-fused, library_id,
    chunk_id)``, whatever order the lists arrived in; it is RESTRICTED when any copy is (R1)."""
    best: dict[str, Scored] = {}
    restricted: set[str] = set()
    for found in lists:
        for name, snippet in found:
            scored = (snippet.scores.get("fused") or 0.0, name, snippet)
            held = best.get(snippet.text)
            if held is None or rank_key(scored) < rank_key(held):
                best[snippet.text] = scored
            if is_restricted(snippet.sensitivity):
                restricted.add(snippet.text)
    return [
        (score, name, replace(snippet, sensitivity=RESTRICTED_SENSITIVITY))
        if text in restricted
        else (score, name, snippet)
        for text, (score, name, snippet) in best.items()
    ]


class MultiIndexRetriever:
    """``search`` over several named indexes (:class:`KnowledgeBase` or any
    :class:`SearchIndex`) at once.

    ``router`` picks the bases (default: every base). ``fusion`` is ``rrf`` (default: rank-based,
    so bases whose scores are not comparable still mix fairly) or ``content_max`` (identical text
    in several bases is one result; scores are compared as they are, so use it for bases with
    the same retrieval settings). The retriever owns a pool of ``max_workers`` threads; close it
    with :meth:`close` or a ``with`` block. The indexes stay open: they belong to the caller.
    """

    def __init__(
        self,
        indexes: Mapping[str, SearchIndex],
        router: Router | None = None,
        *,
        fusion: str = "rrf",
        max_workers: int = 8,
    ) -> None:
        if not indexes or not all(isinstance(n, str) and n for n in indexes):
            raise InvalidArgumentError("indexes must map at least one non-empty name to an index")
        if fusion not in FUSIONS:
            raise InvalidArgumentError(
                f"unknown fusion {fusion!r}; use one of {', '.join(FUSIONS)}"
            )
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < 1:
            raise InvalidArgumentError(
                f"max_workers must be a positive integer, got {max_workers!r}"
            )
        unknown = sorted(set(_declared_names(router)) - set(indexes))
        if unknown:
            raise InvalidArgumentError(
                f"the router names unknown knowledge bases {unknown}; known: {sorted(indexes)}"
            )
        self.indexes = dict(indexes)
        self.router = router
        self.fusion = fusion
        self._pool = ThreadPoolExecutor(max_workers, thread_name_prefix="ragspine-fanout")

    def close(self) -> None:
        """Stop the pool (searches in flight finish first); the indexes stay open."""
        self._pool.shutdown(wait=True)

    def __enter__(self) -> MultiIndexRetriever:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _route(self, queries: Sequence[str]) -> tuple[list[str], str | None]:
        """The bases to search for these queries (the router is asked once, for all of them
        together), and why routing fell back to every base when it did."""
        names = list(self.indexes)
        if self.router is None:
            return names, None
        try:
            named = self.router.route("\n".join(queries), names)
            wanted = set(named)
            chosen = [name for name in names if name in wanted]
        except Exception as exc:  # a router may fail in any way; searching everything is safe
            return names, f"routing failed, searched every knowledge base: {exc}"
        if not chosen:
            return names, f"the router named no knowledge base ({named!r}), searched every one"
        return chosen, None

    def search(
        self,
        query: str | Sequence[str],
        *,
        top_k: int = 10,
        filters: Mapping[str, Any] | None = None,
        mode: str | None = None,
        rerank: str | Reranker | None = None,
        include_restricted: bool = True,
    ) -> ResultList[Snippet]:
        """The fused ``top_k`` over the routed bases for one query or several (sub-questions).

        Bad input (a malformed filter, an unknown mode) raises InvalidArgumentError (R6); a base
        that fails otherwise is left out and named in ``degraded_reasons``, as are the reasons
        its own result gave. ``queries`` on the result are the queries that ran.
        """
        queries = _query_list(query)
        parse_filters(filters)  # a malformed filter fails here, before any routing or search
        names, fallback = self._route(queries)
        pairs = [(q, name) for q in queries for name in names]
        futures: list[Future[ResultList[Snippet]]] = [
            self._pool.submit(
                self.indexes[name].search,
                q,
                top_k=top_k,
                filters=filters,
                mode=mode,
                rerank=rerank,
                include_restricted=include_restricted,
            )
            for q, name in pairs
        ]
        wait(futures)
        reasons = [] if fallback is None else [fallback]
        lists: list[list[Found]] = []
        for (_, name), future in zip(pairs, futures):
            error = future.exception()
            if isinstance(error, InvalidArgumentError):
                raise error  # bad input is the caller's to fix, not a base to skip (R6)
            if error is not None:
                reasons.append(f"{name}: search failed: {error}")
                continue
            found = future.result()
            reasons.extend(f"{name}: {reason}" for reason in found.degraded_reasons)
            lists.append(
                [(name, s) for s in found if include_restricted or not is_restricted(s.sensitivity)]
            )
        merged = fuse_rrf(lists) if self.fusion == "rrf" else _fuse_content_max(lists)
        return ResultList(
            (
                replace(snippet, library_id=name, scores={**snippet.scores, "fused": score})
                for score, name, snippet in sorted(merged, key=rank_key)[:top_k]
            ),
            degraded_reasons=dict.fromkeys(reasons),
            routing_fallback=fallback is not None,
            queries=queries,
        )


def _query_list(query: str | Sequence[str]) -> list[str]:
    """One query or several, each once, in the order given."""
    queries = [query] if isinstance(query, str) else query
    if (
        isinstance(queries, (bytes, Mapping))
        or not queries
        or not all(isinstance(q, str) for q in queries)
    ):
        raise InvalidArgumentError(f"query must be a string or a list of strings, got {query!r}")
    return list(dict.fromkeys(queries))
