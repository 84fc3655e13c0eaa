"""Paragraph-granularity chunking with exact character spans (R10, R2).

Budgets are characters, not tokens, so chunking stays offline and deterministic. Every chunk is
``source[start:end]``: citations can always be checked against the source text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

DEFAULT_CHUNK_CHARS = 480
DEFAULT_OVERLAP_CHARS = 80

_PARAGRAPH_BREAK = re.compile(r"\n[ \t\r\f\v]*\n\s*")
# A sentence ends after 。！？； at once, or after .!?; when whitespace (or the end) follows,
# so "3.14" and "e.g.x" stay whole; closing quotes and brackets stay with their sentence.
_SENTENCE_END = re.compile(r"(?:[。！？；]|[.!?;](?=\s|$))[\"'”’」』）)\]]*")


@dataclass(frozen=True)
class TextChunk:
    """A contiguous span of the source text."""

    text: str
    start: int
    end: int


@dataclass(frozen=True)
class Chunk:
    """A citable chunk with its lineage; ``text`` is always ``source[char_start:char_end]``."""

    chunk_id: str
    doc_id: str
    text: str
    char_start: int
    char_end: int
    ordinal: int = 0
    title: str = ""
    source_path: str = ""
    source_locator: str = ""
    page: int | None = None
    heading: str = ""
    parent_id: str = ""
    window_text: str = ""
    parent_locator: str = ""
    topic: str = ""
    entity: str = ""
    geography: str = ""
    period: str = ""
    language: str = ""
    sensitivity: str = "PUBLIC"
    metadata: dict[str, Any] = field(default_factory=dict)


def validate_budget(max_chars: int, overlap_chars: int) -> None:
    if max_chars <= 0:
        raise ValueError(f"max_chars must be > 0, got {max_chars}")
    if overlap_chars < 0:
        raise ValueError(f"overlap_chars must be >= 0, got {overlap_chars}")
    if overlap_chars >= max_chars:
        raise ValueError(
            f"overlap_chars must be < max_chars, got overlap_chars={overlap_chars}, "
            f"max_chars={max_chars}"
        )


def _strip_span(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _paragraph_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _PARAGRAPH_BREAK.finditer(text):
        spans.append(_strip_span(text, start, match.start()))
        start = match.end()
    spans.append(_strip_span(text, start, len(text)))
    return [(s, e) for s, e in spans if e > s]


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """The sentences of ``text[start:end]`` as spans (ends: 。！？； and . ! ? ; before a space)."""
    end = len(text) if end is None else end
    spans: list[tuple[int, int]] = []
    pos = start
    for match in _SENTENCE_END.finditer(text, start, end):
        span = _strip_span(text, pos, match.end())
        if span[1] > span[0]:
            spans.append(span)
        pos = match.end()
    tail = _strip_span(text, pos, end)
    if tail[1] > tail[0]:
        spans.append(tail)
    return spans


def _hard_cut(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """Cut at the budget, preferring the last whitespace in the window's second half."""
    pieces: list[tuple[int, int]] = []
    while end - start > max_chars:
        cut = start + max_chars
        space = text.rfind(" ", start + max_chars // 2, cut)
        if space > start:
            cut = space
        piece = _strip_span(text, start, cut)
        if piece[1] > piece[0]:
            pieces.append(piece)
        start, _ = _strip_span(text, cut, end)
    if end > start:
        pieces.append((start, end))
    return pieces


def _split_long_paragraph(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """Sentences (hard-cut when needed), packed greedily; the pieces never overlap."""
    units: list[tuple[int, int]] = []
    for s, e in sentence_spans(text, start, end):
        units.extend(_hard_cut(text, s, e, max_chars) if e - s > max_chars else [(s, e)])
    pieces: list[tuple[int, int]] = []
    for s, e in units:
        if pieces and e - pieces[-1][0] <= max_chars:
            pieces[-1] = (pieces[-1][0], e)
        else:
            pieces.append((s, e))
    return pieces


def _overlap_start(text: str, prev: tuple[int, int], end: int, max_chars: int, overlap: int) -> int:
    """Earliest sentence start in the tail of ``prev`` that fits both budgets, else ``-1``."""
    lo = max(prev[0], prev[1] - overlap)
    for s, _ in sentence_spans(text, prev[0], prev[1]):
        if s >= lo and end - s <= max_chars:
            return s
    return -1


def chunk_document(
    text: str,
    *,
    max_chars: int = DEFAULT_CHUNK_CHARS,
    overlap_chars: int = DEFAULT_OVERLAP_CHARS,
) -> list[TextChunk]:
    """Split ``text`` into paragraph-granularity chunks of at most ``max_chars`` characters.

    Short paragraphs are packed together; an over-long paragraph is split at sentence ends
    (。！？；.!?;), then hard-cut. A chunk that starts a new paragraph may begin with whole
    trailing sentences (at most ``overlap_chars``) of the chunk before it; pieces of one
    paragraph never overlap. Each chunk's text is exactly ``text[start:end]``.
    """
    validate_budget(max_chars, overlap_chars)
    spans: list[tuple[int, int]] = []
    starts_paragraph: list[bool] = []
    open_pack = False  # whether spans[-1] is a pack of whole paragraphs that may still grow
    for p_start, p_end in _paragraph_spans(text):
        if p_end - p_start > max_chars:
            pieces = _split_long_paragraph(text, p_start, p_end, max_chars)
            spans.extend(pieces)
            starts_paragraph.extend([True] + [False] * (len(pieces) - 1))
            open_pack = False
        elif open_pack and p_end - spans[-1][0] <= max_chars:
            spans[-1] = (spans[-1][0], p_end)
        else:
            spans.append((p_start, p_end))
            starts_paragraph.append(True)
            open_pack = True
    chunks: list[TextChunk] = []
    for i, (start, end) in enumerate(spans):
        if i and overlap_chars and starts_paragraph[i]:
            overlap_start = _overlap_start(text, spans[i - 1], end, max_chars, overlap_chars)
            if overlap_start >= 0:
                start = overlap_start
        chunks.append(TextChunk(text=text[start:end], start=start, end=end))
    return chunks
