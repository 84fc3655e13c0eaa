"""The agent-facing link (R70–R73); for now the LLM-backed listwise judge (R71)."""

from __future__ import annotations

from ragspine.llm import LLMProvider
from ragspine.retrieval.rerank.listwise_rerank import (
    build_listwise_prompt,
    parse_listwise_response,
)


class ProviderListwiseJudge:
    """A :class:`ListwiseJudge` asking an :class:`LLMProvider`; its errors propagate, and
    ``listwise_rerank`` turns them into the fused order (R6)."""

    def __init__(self, provider: LLMProvider, **options: object) -> None:
        self.provider = provider
        self.options = {"temperature": 0, **options}

    def judge(self, query: str, candidates: list[str]) -> list[int]:
        answer = self.provider.chat(build_listwise_prompt(query, candidates), **self.options)
        return parse_listwise_response(answer, len(candidates))
