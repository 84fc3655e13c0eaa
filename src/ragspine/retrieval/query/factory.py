"""``make_query_pipeline``: the one place that reads the query-pipeline configuration."""

from __future__ import annotations

from pathlib import Path

from ragspine.config import query_settings, switch
from ragspine.errors import InvalidArgumentError
from ragspine.llm import LLMProvider, make_llm_provider
from ragspine.retrieval.query.gate import load_deny_list
from ragspine.retrieval.query.glossary import GlossaryQueryRewriter, load_glossary
from ragspine.retrieval.query.pipeline import QueryIndex, QueryPipeline


def make_query_pipeline(
    index: QueryIndex,
    *,
    transform: str | None = None,
    decompose: bool | None = None,
    adaptive: str | None = None,
    corrective: bool | None = None,
    glossary: str | Path | None = None,
    deny_list: str | Path | None = None,
    num_queries: int | None = None,
    provider: LLMProvider | None = None,
) -> QueryPipeline | None:
    """The pipeline the keywords (or ``RAGSPINE_QUERY_TRANSFORM``, ``RAGSPINE_QUERY_DECOMPOSE=llm``,
    ``RAGSPINE_ADAPTIVE=heuristic|llm``, ``RAGSPINE_CORRECTIVE=1``, ``RAGSPINE_GLOSSARY``,
    ``RAGSPINE_DENY_LIST``, ``RAGSPINE_NUM_QUERIES``) ask for; None when they ask for nothing,
    so the index's own search runs unchanged (R5)."""
    settings = query_settings()
    transform = transform or settings.get("transform") or None
    if transform == "none":
        transform = None
    raw_decompose = settings.get("decompose", "")
    if raw_decompose not in ("", "llm", "none", "0", "1", "true", "false"):
        raise InvalidArgumentError(
            f"RAGSPINE_QUERY_DECOMPOSE={raw_decompose!r}: use llm (or leave it unset)"
        )
    decompose = decompose if decompose is not None else raw_decompose in ("llm", "1", "true")
    adaptive = adaptive or settings.get("adaptive") or None
    if adaptive in ("1", "true", "yes", "on"):
        adaptive = "heuristic"
    corrective = corrective if corrective is not None else switch(settings.get("corrective"))
    glossary = glossary or settings.get("glossary")
    deny_list = deny_list or settings.get("deny_list")
    if not (transform or decompose or adaptive or corrective or glossary):
        return None
    try:
        queries = int(num_queries or settings.get("num_queries") or 3)
    except ValueError as exc:
        raise InvalidArgumentError(f"RAGSPINE_NUM_QUERIES: {exc}") from exc
    needs_model = transform is not None or decompose or adaptive == "llm"
    return QueryPipeline(
        index,
        provider=provider or (make_llm_provider() if needs_model or corrective else None),
        transform=transform,
        decompose=decompose,
        adaptive=adaptive,
        corrective=corrective,
        rewriter=GlossaryQueryRewriter(load_glossary(glossary)) if glossary else None,
        gate=load_deny_list(deny_list) if deny_list else None,
        num_queries=queries,
    )
