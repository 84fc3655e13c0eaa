"""Settings: every ``RAGSPINE_*`` variable is read here and nowhere else (R92).

Each variable has a keyword twin; keywords win over the environment, and a knowledge base's own
recorded settings win over both for what must not change after creation (tokenizer, chunker).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from ragspine.errors import InvalidArgumentError
from ragspine.retrieval.chunking.chunking import DEFAULT_CHUNK_CHARS, DEFAULT_OVERLAP_CHARS
from ragspine.retrieval.lexical.bm25 import DEFAULT_BM25_B, DEFAULT_BM25_K1
from ragspine.retrieval.lexical.tokenizer import STEMMERS

LEXICAL_MODES = ("bm25", "lexical", "economy", "text")
DENSE_MODES = ("hybrid", "vector")
MODES = ("auto", *LEXICAL_MODES, *DENSE_MODES)


@dataclass(frozen=True)
class Settings:
    retrieval_mode: str = "auto"
    chunk_chars: int = DEFAULT_CHUNK_CHARS
    overlap_chars: int = DEFAULT_OVERLAP_CHARS
    stemmer: str = "english"
    bm25_k1: float = DEFAULT_BM25_K1
    bm25_b: float = DEFAULT_BM25_B
    fusion: str = "convex"
    vector_search: str = "auto"  # auto | exact | hnsw

    @classmethod
    def from_env(
        cls, overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
    ) -> Settings:
        """Environment first, then every override that is not ``None``."""
        env = os.environ if environ is None else environ
        overrides = dict(overrides or {})
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(f"RAGSPINE_{f.name.upper()}")
            if raw is not None and raw.strip():
                values[f.name] = _coerce(f.name, type(getattr(cls(), f.name)), raw.strip())
        settings = cls(**values)
        unknown = set(overrides) - {f.name for f in fields(cls)}
        if unknown:
            raise InvalidArgumentError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        given = {k: v for k, v in overrides.items() if v is not None}
        return replace(settings, **given)

    def __post_init__(self) -> None:
        if self.fusion not in ("convex", "rrf"):
            raise InvalidArgumentError(f"unknown fusion {self.fusion!r}; use convex or rrf")
        if self.vector_search not in ("auto", "exact", "hnsw"):
            raise InvalidArgumentError(
                f"unknown vector search {self.vector_search!r}; use auto, exact or hnsw"
            )
        if self.stemmer not in STEMMERS:
            raise InvalidArgumentError(
                f"unknown stemmer {self.stemmer!r}; use one of {', '.join(STEMMERS)}"
            )
        if self.retrieval_mode not in MODES:
            raise InvalidArgumentError(
                f"unknown retrieval mode {self.retrieval_mode!r}; use one of {', '.join(MODES)}"
            )


def _coerce(name: str, kind: type, raw: str) -> Any:
    try:
        return kind(raw)
    except ValueError as exc:
        raise InvalidArgumentError(
            f"RAGSPINE_{name.upper()}={raw!r} is not a valid {kind.__name__}"
        ) from exc


def default_eval_cache(environ: Mapping[str, str] | None = None) -> str:
    """``RAGSPINE_EVAL_CACHE``, else ``$XDG_CACHE_HOME/ragspine/eval``, else ``~/.cache/...``."""
    env = os.environ if environ is None else environ
    if env.get("RAGSPINE_EVAL_CACHE"):
        return env["RAGSPINE_EVAL_CACHE"]
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ragspine", "eval")


def _present(variables: Mapping[str, str], environ: Mapping[str, str] | None) -> dict[str, str]:
    """``{key: value}`` for each ``key: VARIABLE`` that is set and not empty."""
    env = os.environ if environ is None else environ
    return {key: env[name] for key, name in variables.items() if env.get(name)}


def embedding_settings(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``RAGSPINE_EMBEDDING`` (or ``RAGSPINE_EMBEDDING_BACKEND``), ``_MODEL``, ``_BASE_URL``,
    ``_API_KEY``: the embedding backend's settings, empty when unset."""
    variables = {
        "backend": "RAGSPINE_EMBEDDING_BACKEND",
        "model": "RAGSPINE_EMBEDDING_MODEL",
        "base_url": "RAGSPINE_EMBEDDING_BASE_URL",
        "api_key": "RAGSPINE_EMBEDDING_API_KEY",
    }
    found = _present(variables, environ)
    found.update(_present({"backend": "RAGSPINE_EMBEDDING"}, environ))  # the short name wins
    return found


def _service(prefix: str) -> dict[str, str]:
    """The variables of a model service: ``{prefix}_BASE_URL``, ``_API_KEY``, ``_MODEL``,
    ``_TIMEOUT``."""
    return {key: f"{prefix}_{key.upper()}" for key in ("base_url", "api_key", "model", "timeout")}


def llm_settings(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``RAGSPINE_LLM_BASE_URL``, ``_API_KEY``, ``_MODEL``, ``_TIMEOUT``: the chat model's
    settings, empty when unset."""
    return _present(_service("RAGSPINE_LLM"), environ)


def rerank_settings(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``RAGSPINE_RERANKER`` (the spec), ``RAGSPINE_CROSS_ENCODER_DIR``, and the rerank
    service's ``RAGSPINE_RERANK_BASE_URL``, ``_API_KEY``, ``_MODEL``, ``_TIMEOUT``; empty when
    unset."""
    variables = {"spec": "RAGSPINE_RERANKER", "cross_encoder_dir": "RAGSPINE_CROSS_ENCODER_DIR"}
    return _present({**variables, **_service("RAGSPINE_RERANK")}, environ)


def parse_seconds(raw: str | float, variable: str) -> float:
    """A positive number of seconds from a setting, or an error naming the variable."""
    try:
        seconds = float(raw)
    except ValueError as exc:
        raise InvalidArgumentError(f"{variable}={raw!r} is not a number of seconds") from exc
    if not seconds > 0:
        raise InvalidArgumentError(f"{variable} must be a positive number of seconds, got {raw!r}")
    return seconds


def query_settings(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``RAGSPINE_QUERY_TRANSFORM``, ``RAGSPINE_QUERY_DECOMPOSE``, ``RAGSPINE_ADAPTIVE``,
    ``RAGSPINE_CORRECTIVE``, ``RAGSPINE_GLOSSARY``, ``RAGSPINE_DENY_LIST``,
    ``RAGSPINE_NUM_QUERIES``: the query pipeline's switches, empty when unset."""
    keys = ("transform", "decompose", "adaptive", "corrective", "glossary", "deny_list",
            "num_queries")  # fmt: skip
    names = {k: f"RAGSPINE_QUERY_{k.upper()}" for k in ("transform", "decompose")}
    names.update({k: f"RAGSPINE_{k.upper()}" for k in keys if k not in names})
    return _present(names, environ)


def switch(value: str | bool | None) -> bool:
    """A yes/no setting: ``1 true yes on`` (any case) or True."""
    if isinstance(value, bool):
        return value
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def postprocess_settings(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``RAGSPINE_POSTPROCESSOR``: the post-processing chain, empty when unset."""
    return _present({"spec": "RAGSPINE_POSTPROCESSOR"}, environ)
