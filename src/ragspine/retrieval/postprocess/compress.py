"""Extractive compression (R60): the sentences of a snippet most related to the query, within a
character budget, go into ``prompt_text``; ``text`` and the citation stay exactly as they were
(R2). Deterministic, no model.
"""

from __future__ import annotations

from dataclasses import replace

from ragspine.errors import InvalidArgumentError
from ragspine.retrieval.chunking.chunking import sentence_spans
from ragspine.retrieval.lexical.tokenizer import tokenize
from ragspine.retrieval.link.snippet import Snippet

GAP = " … "


class ExtractiveCompressor:
    name = "compress"

    def __init__(self, *, budget_chars: int = 320) -> None:
        if budget_chars <= 0:
            raise InvalidArgumentError(f"the compression budget must be > 0, got {budget_chars}")
        self.budget_chars = budget_chars

    def compress(self, query: str, text: str) -> str:
        """The sentences sharing most query terms (ties: earlier first) that fit the budget, in
        text order — the best one always — joined with an ellipsis where some were left out."""
        spans = sentence_spans(text)
        if len(text) <= self.budget_chars or len(spans) <= 1:
            return text
        wanted = set(tokenize(query))
        overlap = [len(wanted & set(tokenize(text[s:e]))) for s, e in spans]
        ranked = sorted(range(len(spans)), key=lambda i: (-overlap[i], i))
        kept: list[int] = []
        used = 0
        for i in ranked:
            length = spans[i][1] - spans[i][0]
            if kept and (overlap[i] == 0 or used + length > self.budget_chars):
                continue  # the best sentence always stays; others only if on the query
            kept.append(i)
            used += length
        kept.sort()
        parts = []
        for position, i in enumerate(kept):
            if position and i != kept[position - 1] + 1:
                parts.append(GAP)
            elif position:
                parts.append(" ")
            parts.append(text[spans[i][0] : spans[i][1]])
        return "".join(parts)

    def process(self, query: str, snippets: list[Snippet], top_k: int) -> list[Snippet]:
        return [
            replace(s, prompt_text=self.compress(query, s.prompt_text or s.text))
            for s in snippets[:top_k]
        ]
