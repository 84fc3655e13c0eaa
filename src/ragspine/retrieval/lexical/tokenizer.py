"""Tokenization for BM25: ASCII words plus CJK unigrams and bigrams (R20).

The double granularity lets BM25 handle Chinese without a word segmenter. Stemming is an option of
:class:`Tokenizer` (English words only); :func:`tokenize` is exactly R20.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

# Han (incl. extension A and compatibility ideographs), kana, Hangul, CJK punctuation excluded.
_CJK_CLASS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
_TOKEN_RUN = re.compile(rf"[a-z0-9]+|[{_CJK_CLASS}]+")
_CJK_CHAR = re.compile(rf"[{_CJK_CLASS}]")
_ASCII_WORD = re.compile(r"[a-z0-9]+")
_LATIN_WORD = re.compile(r"[A-Za-z]+")

SCRIPT_NEUTRAL, SCRIPT_LATIN, SCRIPT_CJK = 0, 1, 2

TOKENIZER_VERSION = 1
_STEM_CACHE_LIMIT = 1_000_000
STEMMERS = ("none", "english")


def _cjk_grams(run: str) -> list[str]:
    return list(run) + [run[i : i + 2] for i in range(len(run) - 1)]


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds any Han, kana or Hangul character."""
    return _CJK_CHAR.search(text) is not None


def dominant_script(text: str) -> int:
    """``SCRIPT_CJK`` when CJK characters outnumber Latin words, ``SCRIPT_LATIN`` when Latin
    words do, else ``SCRIPT_NEUTRAL`` (digits, symbols, nothing).

    Why: a lexical match needs a shared script. A Chinese query and an English passage share
    few tokens whatever their relevance, so BM25 has no evidence either way about the pair
    (counting a character against a word roughly balances Chinese's shorter words).
    """
    cjk = len(_CJK_CHAR.findall(text))
    latin = len(_LATIN_WORD.findall(text))
    if cjk == latin == 0:
        return SCRIPT_NEUTRAL
    return SCRIPT_CJK if cjk > latin else SCRIPT_LATIN


def tokenize(text: str) -> list[str]:
    """Lower-case; ASCII letter/digit runs are words; CJK runs give unigrams then bigrams."""
    lowered = text.lower()
    if not _CJK_CHAR.search(lowered):
        return _ASCII_WORD.findall(lowered)
    tokens: list[str] = []
    for run in _TOKEN_RUN.findall(lowered):
        if _CJK_CHAR.match(run):
            tokens.extend(_cjk_grams(run))
        else:
            tokens.append(run)
    return tokens


@dataclass(frozen=True)
class Tokenizer:
    """The configured tokenizer of a knowledge base; ``stemmer`` is ``"none"`` or ``"english"``."""

    stemmer: str = "english"

    def __post_init__(self) -> None:
        if self.stemmer not in STEMMERS:
            raise ValueError(f"unknown stemmer {self.stemmer!r}; choose one of {STEMMERS}")

    @cached_property
    def _stem_words(self) -> Callable[[list[str]], list[str]] | None:
        if self.stemmer == "none":
            return None
        import Stemmer  # PyStemmer: Snowball in C

        stem_word = Stemmer.Stemmer(self.stemmer).stemWord
        cache: dict[str, str] = {}

        def stem_words(words: list[str]) -> list[str]:
            stems = list(map(cache.get, words))
            if None in stems:
                if len(cache) > _STEM_CACHE_LIMIT:
                    cache.clear()
                for i, stem in enumerate(stems):
                    if stem is None:
                        stems[i] = cache[words[i]] = stem_word(words[i])
            return stems  # type: ignore[return-value]

        return stem_words

    def __call__(self, text: str) -> list[str]:
        stem_words = self._stem_words
        if stem_words is None:
            return tokenize(text)
        lowered = text.lower()
        if not _CJK_CHAR.search(lowered):
            return stem_words(_ASCII_WORD.findall(lowered))
        tokens: list[str] = []
        for run in _TOKEN_RUN.findall(lowered):
            if _CJK_CHAR.match(run):
                tokens.extend(_cjk_grams(run))
            else:
                tokens.extend(stem_words([run]))
        return tokens

    def describe(self) -> dict[str, object]:
        return {"name": "ascii-cjk-bigram", "version": TOKENIZER_VERSION, "stemmer": self.stemmer}
