"""``make_reranker(spec)``: which rerankers run, in which order (R51–R55).

The spec names one reranker or a comma-separated chain applied in order (``"embedding,llm_score"``):

- ``cross_encoder`` / ``ce``: a local ONNX cross-encoder from ``RAGSPINE_CROSS_ENCODER_DIR``;
- ``http``: a ``/rerank`` service at ``RAGSPINE_RERANK_BASE_URL`` (``_API_KEY``, ``_MODEL``,
  ``_TIMEOUT``);
- ``llm_filter``, ``llm_score`` (``llm_score:show`` grades without reordering), ``listwise``: the
  chat model of ``RAGSPINE_LLM_*`` (or ``provider=``);
- ``embedding`` (``embedding:e5``, ``embedding:minilm``): rescoring with a bundled bi-encoder;
- ``auto``: the cross-encoder when one is configured, else nothing — see :func:`auto_stages`;
- ``none`` or empty: no reranking.

Only this module reads the reranker configuration; unknown names and missing settings are clear
errors here, while a configured model that fails at query time degrades the result (R6).
"""

from __future__ import annotations

from collections.abc import Callable

from ragspine.config import parse_seconds, rerank_settings
from ragspine.errors import InvalidArgumentError
from ragspine.llm import LLMProvider, make_llm_provider
from ragspine.retrieval.rerank.base import RerankChain, Reranker
from ragspine.retrieval.rerank.embedding_rerank import EmbeddingReranker
from ragspine.retrieval.rerank.http_rerank import HttpReranker
from ragspine.retrieval.rerank.listwise_rerank import ListwiseReranker, ProviderListwiseJudge
from ragspine.retrieval.rerank.llm_rerank import LLMFilterReranker, LLMScoreReranker
from ragspine.retrieval.rerank.onnx_cross_encoder import OnnxCrossEncoder
from ragspine.retrieval.vector.embedding_backends import make_embedding_backend

RERANKER_NAMES = (
    "cross_encoder",
    "ce",
    "http",
    "llm_filter",
    "llm_score",
    "listwise",
    "embedding",
    "auto",
    "none",
)
DEFAULT_EMBEDDING_RERANKER = "e5"
_NOT_OFFLINE = {
    "colbert": "ColBERT late interaction",
    "splade": "SPLADE learned sparse",
}


def _cross_encoder(directory: str | None) -> OnnxCrossEncoder:
    if not directory:
        raise InvalidArgumentError(
            "the cross_encoder reranker needs a model directory: set RAGSPINE_CROSS_ENCODER_DIR "
            "to an ONNX export of a cross-encoder (model.onnx + tokenizer.json)"
        )
    return OnnxCrossEncoder(directory)


def _llm(provider: LLMProvider | None, name: str) -> LLMProvider:
    found = provider if provider is not None else make_llm_provider()
    if found is None:
        raise InvalidArgumentError(
            f"the {name} reranker needs a chat model: set RAGSPINE_LLM_BASE_URL and "
            "RAGSPINE_LLM_MODEL (any OpenAI-compatible server) or pass provider="
        )
    return found


def auto_stages(cross_encoder_dir: str | None) -> list[Reranker]:
    """What ``auto`` runs: the cross-encoder when one is configured; otherwise nothing, since
    the one offline option that ships (``embedding``) adds ~1 s per query on two cores for
    gains within noise (``bench/bench_rerank.py``, README)."""
    return [_cross_encoder(cross_encoder_dir)] if cross_encoder_dir else []


def make_reranker(
    spec: str | None = None,
    *,
    provider: LLMProvider | None = None,
    cross_encoder_dir: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    model: str | None = None,
    timeout: float | None = None,
    top_n: int = 10,
) -> RerankChain | None:
    """The reranking chain for ``spec`` (default ``RAGSPINE_RERANKER``), or None for none.

    ``top_n`` is how many of the first results the LLM rerankers send to the model.
    """
    settings = rerank_settings()
    text = (spec if spec is not None else settings.get("spec", "none")).strip().lower()
    directory = cross_encoder_dir or settings.get("cross_encoder_dir")

    def http() -> HttpReranker:
        url = base_url or settings.get("base_url")
        if not url:
            raise InvalidArgumentError(
                "the http reranker needs RAGSPINE_RERANK_BASE_URL (e.g. http://host:8080/v1)"
            )
        return HttpReranker(
            url,
            model=model or settings.get("model", ""),
            api_key=api_key or settings.get("api_key", ""),
            timeout=parse_seconds(
                timeout if timeout is not None else settings.get("timeout", "30"),
                "RAGSPINE_RERANK_TIMEOUT",
            ),
        )

    builders: dict[str, Callable[[str], list[Reranker]]] = {
        "cross_encoder": lambda _: [_cross_encoder(directory)],
        "ce": lambda _: [_cross_encoder(directory)],
        "http": lambda _: [http()],
        "llm_filter": lambda _: [LLMFilterReranker(_llm(provider, "llm_filter"), top_n=top_n)],
        "llm_score": lambda option: [
            LLMScoreReranker(_llm(provider, "llm_score"), top_n=top_n, reorder=option != "show")
        ],
        "listwise": lambda _: [
            ListwiseReranker(ProviderListwiseJudge(_llm(provider, "listwise")), top_n=top_n)
        ],
        "embedding": lambda option: [_embedding(option or DEFAULT_EMBEDDING_RERANKER)],
        "auto": lambda _: auto_stages(directory),
        "none": lambda _: [],
    }
    stages: list[Reranker] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, option = part.partition(":")
        if name in _NOT_OFFLINE:
            raise InvalidArgumentError(
                f"{_NOT_OFFLINE[name]} reranking needs a model, and none ships in a package "
                "that installs offline; use cross_encoder with a local model instead"
            )
        if name not in builders:
            raise InvalidArgumentError(
                f"unknown reranker {part!r}; use one of {', '.join(RERANKER_NAMES)} "
                "or a comma-separated chain of them"
            )
        stages.extend(builders[name](option))
    return RerankChain(stages) if stages else None


def _embedding(model: str) -> EmbeddingReranker:
    backend = make_embedding_backend(model)
    if backend is None:
        raise InvalidArgumentError(f"embedding reranker: {model!r} names no embedding model")
    return EmbeddingReranker(backend)
