from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragspine.retrieval.chunking.chunking import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
    chunk_document,
)


def test_r10_defaults_are_480_and_80() -> None:
    assert (DEFAULT_CHUNK_CHARS, DEFAULT_OVERLAP_CHARS) == (480, 80)


@pytest.mark.parametrize(
    ("max_chars", "overlap"), [(0, 0), (-5, 0), (100, -1), (100, 100), (100, 150)]
)
def test_r10_invalid_budgets_raise_value_error(max_chars: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        chunk_document("text", max_chars=max_chars, overlap_chars=overlap)


def test_r10_short_paragraphs_are_packed_into_one_chunk() -> None:
    text = "First paragraph.\n\nSecond paragraph.\n\nThird one."
    chunks = chunk_document(text, max_chars=480, overlap_chars=80)
    assert [c.text for c in chunks] == [text]


def test_r10_long_paragraph_splits_at_sentence_ends_without_overlap() -> None:
    sentences = [
        "这是第一句话，内容比较长一些。",
        "第二句话也不短！",
        "第三句？",
        "Fourth one; ",
        "fifth.",
    ]
    paragraph = "".join(sentences) * 6
    chunks = chunk_document(paragraph, max_chars=60, overlap_chars=20)
    assert len(chunks) > 1
    for chunk in chunks:
        assert len(chunk.text) <= 60
        assert chunk.text[-1] in "。！？；.!?;", chunk.text
    for before, after in itertools.pairwise(chunks):
        assert before.end <= after.start  # pieces of one paragraph never overlap


def test_r10_sentence_longer_than_budget_is_hard_cut() -> None:
    text = "x" * 250
    chunks = chunk_document(text, max_chars=100, overlap_chars=10)
    assert [len(c.text) for c in chunks] == [100, 100, 50]
    assert "".join(c.text for c in chunks) == text


def test_r10_decimal_points_do_not_end_sentences() -> None:
    text = ("The value 3.14 is pi. " * 10).strip()
    chunks = chunk_document(text, max_chars=50, overlap_chars=0)
    assert all("3.14" in c.text for c in chunks)


def test_r10_new_paragraph_chunk_overlaps_previous_tail_by_whole_sentences() -> None:
    first = "Alpha sentence one. Alpha two. Short end."
    second = "Beta paragraph " + "b" * 30 + "."
    text = f"{first}\n\n{second}"
    chunks = chunk_document(text, max_chars=len(second) + 15, overlap_chars=12)
    assert chunks[0].text == first
    assert chunks[1].text.startswith("Short end.")
    assert chunks[1].text.endswith(second)
    assert chunks[1].start < chunks[0].end


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(
        alphabet=st.sampled_from(list("ab c。！？；.!?;\n\t中文字🙂é")) | st.characters(),
        max_size=1500,
    ),
    max_chars=st.integers(min_value=1, max_value=300),
    overlap_ratio=st.floats(min_value=0, max_value=0.99),
)
def test_r2_every_chunk_is_the_exact_source_span(
    text: str, max_chars: int, overlap_ratio: float
) -> None:
    overlap = min(max_chars - 1, int(max_chars * overlap_ratio))
    chunks = chunk_document(text, max_chars=max_chars, overlap_chars=overlap)
    for chunk in chunks:
        assert text[chunk.start : chunk.end] == chunk.text
        assert 0 < len(chunk.text) <= max_chars
        assert not chunk.text[0].isspace() and not chunk.text[-1].isspace()
    starts = [c.start for c in chunks]
    assert starts == sorted(starts)
    # every non-space character of the source is covered by some chunk
    covered = set()
    for c in chunks:
        covered.update(range(c.start, c.end))
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())
