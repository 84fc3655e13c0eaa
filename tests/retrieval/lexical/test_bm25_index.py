from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragspine.retrieval.lexical.index import BM25Index
from ragspine.retrieval.lexical.retrieval import (
    DEFAULT_BM25_B,
    DEFAULT_BM25_K1,
    Tokenizer,
    bm25_scores,
)
from ragspine.retrieval.lexical.tokenizer import SCRIPT_CJK, SCRIPT_LATIN

PLAIN = Tokenizer(stemmer="none")


def test_r21_constants() -> None:
    assert (DEFAULT_BM25_K1, DEFAULT_BM25_B) == (1.5, 0.75)


def test_r21_bm25_scores_matches_the_okapi_formula_by_hand() -> None:
    docs = [["a", "b"], ["b", "b", "c"], ["c"], ["d"], ["e"]]
    scores = bm25_scores(["a", "b"], docs)
    avg = 8 / 5
    idf_a = math.log((5 - 1 + 0.5) / (1 + 0.5))
    idf_b = math.log((5 - 2 + 0.5) / (2 + 0.5))

    def part(idf: float, tf: int, length: int) -> float:
        return idf * tf * 2.5 / (tf + 1.5 * (0.25 + 0.75 * length / avg))

    assert scores[0] == pytest.approx(part(idf_a, 1, 2) + part(idf_b, 1, 2))
    assert scores[1] == pytest.approx(part(idf_b, 2, 3))
    assert scores[2:] == [0.0, 0.0, 0.0]


def test_r21_common_terms_never_score_negative() -> None:
    assert bm25_scores(["x"], [["x"], ["x"], ["x", "y"]]) == [0.0, 0.0, 0.0]


def build(texts: list[str], tokenizer: Tokenizer = PLAIN, **kw: float) -> BM25Index:
    index = BM25Index(tokenizer, **kw)
    index.apply([(i, f"c{i:03d}", t) for i, t in enumerate(texts)], [], 1)
    return index


words = st.sampled_from(["apple", "banana", "cherry", "date", "苹果", "香蕉", "x1"])
docs_strategy = st.lists(
    st.lists(words, min_size=0, max_size=12).map(" ".join), min_size=1, max_size=25
)


@settings(max_examples=150, deadline=None)
@given(docs=docs_strategy, query=st.lists(words, min_size=1, max_size=5).map(" ".join),
       k1=st.floats(0.0, 3.0), b=st.floats(0.0, 1.0))  # fmt: skip
def test_r21_index_scores_equal_the_reference(
    docs: list[str], query: str, k1: float, b: float
) -> None:
    index = build(docs, k1=k1, b=b)
    expected = bm25_scores(PLAIN(query), [PLAIN(d) for d in docs], k1, b)
    slots, scores = index.score_slots(query)
    got = dict(zip(slots.tolist(), scores.tolist()))
    for i, value in enumerate(expected):
        assert got.get(i, 0.0) == pytest.approx(value, rel=1e-9, abs=1e-12)


def test_r21_common_words_still_find_documents_in_a_tiny_collection() -> None:
    index = build(["ACME revenue", "ACME costs", "other"])
    hits = index.search("acme", 10)
    assert [(h.key, h.score) for h in hits] == [("c000", 0.0), ("c001", 0.0)]
    assert [h.key for h in index.search("acme costs", 10)] == ["c001"]


def test_r21_search_never_touches_postings_of_other_terms() -> None:
    index = build(["alpha beta", "gamma", "delta"])
    assert [h.key for h in index.search("gamma", 10)] == ["c001"]
    assert index.search("unknownword", 10) == []


def test_r3_ties_break_by_key_and_cut_exactly_at_top_k() -> None:
    index = BM25Index(PLAIN)
    others = [(i, f"z{i}", "other text") for i in range(10, 16)]
    index.apply([(5, "b", "same words"), (3, "c", "same words"), (9, "a", "same words"),
                 *others], [], 1)  # fmt: skip
    assert [h.key for h in index.search("same", 10)] == ["a", "b", "c"]
    assert [h.key for h in index.search("same", 2)] == ["a", "b"]


@settings(max_examples=60, deadline=None)
@given(docs=docs_strategy, data=st.data())
def test_r3_r12_incremental_history_gives_bit_identical_scores(
    docs: list[str], data: st.DataObject
) -> None:
    """Adding, retiring and re-adding in any order scores exactly like a fresh build."""
    keep = data.draw(st.lists(st.booleans(), min_size=len(docs), max_size=len(docs)))
    query = data.draw(st.lists(words, min_size=1, max_size=4).map(" ".join))
    incremental = BM25Index(PLAIN)
    generation = 0
    for i, text in reversed(list(enumerate(docs))):
        generation += 1
        incremental.apply([(i, f"c{i:03d}", text)], [], generation)
        incremental.apply([(100 + i, f"junk{i}", "apple junk words")], [], generation)
    generation += 1
    incremental.apply([], [(100 + i, "apple junk words") for i in range(len(docs))], generation)
    generation += 1
    incremental.apply([], [(i, t) for i, t in enumerate(docs) if not keep[i]], generation)
    fresh = BM25Index(PLAIN)
    fresh.apply([(i, f"c{i:03d}", t) for i, t in enumerate(docs) if keep[i]], [], 1)
    a_slots, a_scores = incremental.score_slots(query)
    b_slots, b_scores = fresh.score_slots(query)
    assert a_slots.tolist() == b_slots.tolist()
    assert a_scores.tobytes() == b_scores.tobytes()
    assert incremental.search(query, 5) == fresh.search(query, 5)


def test_r12_many_small_adds_merge_segments_and_stay_correct() -> None:
    index = BM25Index(PLAIN)
    for i in range(40):
        index.apply([(i, f"c{i:03d}", f"doc number{i} shared")], [], i + 1)
    assert index.n_segments <= 9
    assert len(index.search("shared", 100)) == 40
    index.apply([], [(i, f"doc number{i} shared") for i in range(0, 40, 2)], 50)
    hits = index.search("shared", 100)
    assert sorted(h.slot for h in hits) == list(range(1, 40, 2))


def test_allowed_mask_restricts_before_scoring() -> None:
    index = build(["apple pie", "apple tart", "apple"])
    allowed = np.array([False, True, False])
    assert [h.key for h in index.search("apple", 10, allowed)] == ["c001"]
    assert index.search("apple", 10, np.zeros(0, dtype=bool)) == []


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    index = build(["苹果 apple", "banana split", "cherry"])
    index.save(tmp_path / "lex")
    index.apply([(7, "c007", "apple again")], [(1, "banana split")], 2)
    index.save(tmp_path / "lex")
    loaded = BM25Index.load(tmp_path / "lex", PLAIN)
    assert loaded.generation == 2
    for query in ("apple", "banana", "苹果", "cherry"):
        assert loaded.search(query, 10) == index.search(query, 10)
    assert loaded.scripts([0, 2, 7, 99]).tolist() == [SCRIPT_CJK, SCRIPT_LATIN, SCRIPT_LATIN, 0]
    with pytest.raises(ValueError):
        BM25Index.load(tmp_path / "lex", Tokenizer(stemmer="english"))


def test_interrupted_save_keeps_the_previous_index(tmp_path: Path) -> None:
    index = build(["apple", "banana"])
    index.save(tmp_path / "lex")
    before = (tmp_path / "lex" / "meta.json").read_bytes()
    index.apply([(5, "c005", "apple brandnewterm")], [], 2)
    # a crash after appending vocabulary but before meta.json switches
    with open(tmp_path / "lex" / "vocab.jsonl", "ab") as fh:
        fh.write(b'"garbage-from-crash"\n')
    loaded = BM25Index.load(tmp_path / "lex", PLAIN)
    assert (tmp_path / "lex" / "meta.json").read_bytes() == before
    assert loaded.generation == 1 and [h.key for h in loaded.search("apple", 5)] == ["c000"]
    loaded.apply([(5, "c005", "apple brandnewterm")], [], 2)
    loaded.save(tmp_path / "lex")
    again = BM25Index.load(tmp_path / "lex", PLAIN)
    assert [h.key for h in again.search("brandnewterm", 5)] == ["c005"]


@settings(max_examples=80, deadline=None)
@given(
    docs=st.lists(st.lists(words, min_size=1, max_size=6).map(" ".join), min_size=1, max_size=12),
    cuts=st.lists(st.integers(1, 3), min_size=12, max_size=12),
    query=st.lists(words, min_size=1, max_size=4).map(" ".join),
)
def test_r21_document_scores_equal_bm25_over_whole_documents(
    docs: list[str], cuts: list[int], query: str
) -> None:
    """Chunks grouped by document score as the reference BM25 of the whole documents."""
    texts, owner = [], []
    for d, text in enumerate(docs):
        tokens = text.split()
        size = max(1, -(-len(tokens) // cuts[d]))  # cut each document into chunks
        for start in range(0, len(tokens), size):
            texts.append(" ".join(tokens[start : start + size]))
            owner.append(d)
    index = build(texts)
    groups = np.array(owner, dtype=np.int64)
    slots, scores = index.ranked_groups(query, len(docs), groups)
    expected = bm25_scores(PLAIN(query), [PLAIN(d) for d in docs], DEFAULT_BM25_K1, DEFAULT_BM25_B)
    got = {owner[slot]: score for slot, score in zip(slots, scores)}
    for d, value in enumerate(expected):
        assert got.get(d, 0.0) == pytest.approx(value, rel=1e-9, abs=1e-12)
    assert scores == sorted(scores, reverse=True)


def test_r4_document_scores_count_only_allowed_chunks() -> None:
    index = build(["apple banana", "apple", "cherry", "date", "x1"])
    groups = np.array([0, 0, 1, 2, 3], dtype=np.int64)
    allowed = np.array([False, True, True, True, True])
    whole = dict(zip(*index.ranked_groups("apple banana", 5, groups)))
    narrowed = dict(zip(*index.ranked_groups("apple banana", 5, groups, allowed)))
    assert set(whole) == {0} and set(narrowed) == {1}  # named by an allowed chunk
    assert narrowed[1] < whole[0]  # banana's chunk is filtered out
