"""``make_postprocessor(spec)``: which post-processors run, in order (R60)."""

from __future__ import annotations

from collections.abc import Sequence

from ragspine.config import postprocess_settings
from ragspine.errors import InvalidArgumentError
from ragspine.retrieval.link.snippet import Snippet
from ragspine.retrieval.postprocess.base import Postprocessor
from ragspine.retrieval.postprocess.compress import ExtractiveCompressor
from ragspine.retrieval.postprocess.reorder import MMR, LostInTheMiddle
from ragspine.retrieval.vector.embedding_backends import EmbeddingBackend, make_embedding_backend

POSTPROCESSOR_NAMES = ("mmr", "lost_in_middle", "compress", "none")


class PostprocessorChain:
    """Post-processors applied in order, each seeing the previous one's list; the result holds
    at most ``top_k`` snippets."""

    def __init__(self, stages: Sequence[Postprocessor]) -> None:
        self.stages = tuple(stages)

    def process(self, query: str, snippets: list[Snippet], top_k: int) -> list[Snippet]:
        for stage in self.stages:
            snippets = stage.process(query, snippets, top_k)
        return snippets[:top_k]


def make_postprocessor(
    spec: str | None = None,
    *,
    embedding: EmbeddingBackend | None = None,
    mmr_lambda: float = 0.7,
    budget_chars: int = 320,
) -> PostprocessorChain | None:
    """The chain for ``spec`` (``"mmr,lost_in_middle,compress"``; default
    ``RAGSPINE_POSTPROCESSOR``), or None when it names none (R5). MMR compares snippets with
    ``embedding`` (the knowledge base's own model, when the link builds it), else the bundled
    default model."""
    text = (spec if spec is not None else postprocess_settings().get("spec", "")).lower()
    stages: list[Postprocessor] = []
    for name in filter(None, (part.strip() for part in text.split(","))):
        if name == "mmr":
            backend = embedding or make_embedding_backend("auto")
            if backend is None:
                raise InvalidArgumentError(
                    "mmr compares snippets by embedding: install ragspine[embed-onnx] or pass "
                    "embedding="
                )
            stages.append(MMR(backend, lambda_=mmr_lambda))
        elif name == "lost_in_middle":
            stages.append(LostInTheMiddle())
        elif name == "compress":
            stages.append(ExtractiveCompressor(budget_chars=budget_chars))
        elif name != "none":
            raise InvalidArgumentError(
                f"unknown post-processor {name!r}; use {', '.join(POSTPROCESSOR_NAMES)}"
            )
    return PostprocessorChain(stages) if stages else None
