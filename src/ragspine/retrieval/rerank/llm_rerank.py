"""Rerankers that ask a chat model (R53): a yes/no relevance filter and a 0–10 grader.

Both send one request per query with the open snippets among the first ``top_n`` only (cut before
the call, to save tokens and calls), never a RESTRICTED one (R1). An answer that cannot be read
raises, so the chain keeps the previous order and says so (R6).
"""

from __future__ import annotations

from collections.abc import Sequence

from ragspine.llm import LLMProvider, json_list
from ragspine.retrieval.link.snippet import Snippet
from ragspine.retrieval.rerank.base import RerankError, ScoringReranker, open_positions
from ragspine.retrieval.rerank.listwise_rerank import passages_prompt

FILTER_INSTRUCTIONS = (
    "You judge whether passages help answer a query. Reply with a JSON list of the numbers of "
    "the passages that are relevant, such as [0, 2], or [] when none is."
)
SCORE_INSTRUCTIONS = (
    "You grade how well each passage answers a query, from 0 (unrelated) to 10 (answers it "
    "fully). Reply with a JSON list of the grades, one per passage in the order given, such as "
    "[7, 0, 3]."
)


class LLMFilterReranker:
    """Keeps the open snippets the model calls relevant, in their previous order; when it calls
    none relevant, the first ``top_n`` stay as they were (a filter must not empty the answer)."""

    name = "llm_filter"

    def __init__(self, provider: LLMProvider, *, top_n: int = 10) -> None:
        self.provider = provider
        self.top_n = top_n

    def rerank(self, query: str, results: Sequence[Snippet]) -> list[Snippet]:
        head = list(results[: self.top_n])
        positions = open_positions(head)
        if not positions:
            return head
        texts = [head[i].text for i in positions]
        answer = self.provider.chat(
            passages_prompt(FILTER_INSTRUCTIONS, query, texts), temperature=0
        )
        chosen = json_list(answer)
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in chosen):
            raise RerankError(f"the model named passages by something else than numbers: {chosen}")
        relevant = {positions[i] for i in chosen if 0 <= i < len(positions)}
        if not relevant:
            return head
        return [s for p, s in enumerate(head) if p in relevant or p not in positions]


class LLMScoreReranker(ScoringReranker):
    """Orders the open snippets among the first ``top_n`` by the model's 0–10 grade, shown as
    ``rerank`` in 0–1; ``reorder=False`` only shows the grades."""

    name = "llm_score"

    def __init__(self, provider: LLMProvider, *, top_n: int = 10, reorder: bool = True) -> None:
        self.provider = provider
        self.top_n = top_n
        self.reorder = reorder

    def score(self, query: str, results: Sequence[Snippet]) -> list[float]:
        texts = [s.text for s in results]
        answer = self.provider.chat(
            passages_prompt(SCORE_INSTRUCTIONS, query, texts), temperature=0
        )
        grades = json_list(answer)
        if len(grades) != len(texts) or not all(
            isinstance(g, (int, float)) and not isinstance(g, bool) for g in grades
        ):
            raise RerankError(f"the model gave {grades!r} for {len(texts)} passages")
        return [min(max(float(g), 0.0), 10.0) / 10.0 for g in grades]
