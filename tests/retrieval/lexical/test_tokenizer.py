from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragspine.retrieval.lexical.retrieval import Tokenizer, tokenize
from ragspine.retrieval.lexical.tokenizer import (
    SCRIPT_CJK,
    SCRIPT_LATIN,
    SCRIPT_NEUTRAL,
    dominant_script,
)


def test_r20_ascii_words_are_lowercased_runs_of_letters_and_digits() -> None:
    assert tokenize("Revenue FELL 12% in Q3-2023, e.g. ACME_CN") == [
        "revenue", "fell", "12", "in", "q3", "2023", "e", "g", "acme", "cn",
    ]  # fmt: skip


def test_r20_cjk_runs_emit_unigrams_and_bigrams() -> None:
    assert tokenize("营收下滑") == ["营", "收", "下", "滑", "营收", "收下", "下滑"]
    assert tokenize("为什么ACME营收") == [
        "为",
        "什",
        "么",
        "为什",
        "什么",
        "acme",
        "营",
        "收",
        "营收",
    ]


def test_r20_single_cjk_character_has_no_bigram_and_punctuation_splits_runs() -> None:
    assert tokenize("中，国") == ["中", "国"]


def test_r20_non_ascii_latin_letters_are_separators() -> None:
    assert tokenize("naïve café") == ["na", "ve", "caf"]


@given(st.text(max_size=200))
def test_r20_tokens_are_lowercase_and_nonempty(text: str) -> None:
    for token in tokenize(text):
        assert token and token == token.lower()
        assert 1 <= len(token) <= 2 or token.isascii()


def test_stemming_is_a_tokenizer_option_for_english_words_only() -> None:
    stem = Tokenizer(stemmer="english")
    assert stem("Running dogs ran 跑步") == ["run", "dog", "ran", "跑", "步", "跑步"]
    assert Tokenizer(stemmer="none")("Running dogs") == tokenize("Running dogs")
    with pytest.raises(ValueError):
        Tokenizer(stemmer="klingon")


@pytest.mark.parametrize(
    ("text", "script"),
    [
        ("黑豹队的防守丢了多少分？", SCRIPT_CJK),
        ("国家橄榄球联盟 (NFL) 的比赛", SCRIPT_CJK),  # a Latin name inside Chinese text
        ("How many points did the Panthers defense give up?", SCRIPT_LATIN),
        ("The capital is Beijing (北京).", SCRIPT_LATIN),
        ("2015 – 308 / 24", SCRIPT_NEUTRAL),
        ("", SCRIPT_NEUTRAL),
    ],
)
def test_r25_dominant_script(text: str, script: int) -> None:
    assert dominant_script(text) == script
