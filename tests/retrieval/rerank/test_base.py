"""The reranker seam: RESTRICTED withheld from every model and kept in place (R1), chains in
order (R55), failures keep the previous order and say so (R6)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragspine.retrieval.link.snippet import Snippet
from ragspine.retrieval.rerank.base import RerankChain, Reranker, RerankError, ScoringReranker
from tests.retrieval.rerank.helpers import ids, snippet


class LengthScorer(ScoringReranker):
    """Scores by text length; records every text it is shown."""

    name = "length"

    def __init__(self, top_n: int | None = None, fail: bool = False) -> None:
        self.top_n = top_n
        self.fail = fail
        self.shown: list[str] = []

    def score(self, query: str, results: Sequence[Snippet]) -> list[float]:
        self.shown.extend(s.text for s in results)
        if self.fail:
            raise RerankError("model down")
        return [float(len(s.text)) for s in results]


LABELS = st.sampled_from(["PUBLIC", "RESTRICTED", "restricted", " Restricted ", "INTERNAL"])


@given(st.lists(st.tuples(LABELS, st.integers(1, 40)), max_size=16), st.integers(0, 20))
def test_r1_restricted_never_reaches_a_scoring_model_and_keeps_its_position(
    rows: list[tuple[str, int]], top_n: int
) -> None:
    results = [snippet(i, "x" * n + f" {label}", label) for i, (label, n) in enumerate(rows)]
    scorer = LengthScorer(top_n=top_n)
    out = RerankChain([scorer]).apply("q", results).results
    assert not any("RESTRICTED" in text.upper() for text in scorer.shown)
    assert sorted(ids(out)) == sorted(ids(results))
    for position, result in enumerate(results):
        if result.sensitivity.strip().upper() == "RESTRICTED" or position >= top_n:
            assert out[position] == result


def test_r51_scores_order_the_open_items_and_are_shown() -> None:
    results = [snippet(0, "aa"), snippet(1, "aaaa"), snippet(2, "secret", "RESTRICTED"),
               snippet(3, "aaa")]  # fmt: skip
    out = RerankChain([LengthScorer()]).apply("q", results)
    assert ids(out.results) == ["c001", "c003", "c002", "c000"]
    assert [s.scores.get("rerank") for s in out.results] == [4.0, 3.0, None, 2.0]
    assert not out.degraded_reasons


def test_r55_a_chain_applies_in_order_each_seeing_the_previous_order() -> None:
    class Reverse:
        name = "reverse"

        def rerank(self, query: str, results: Sequence[Snippet]) -> list[Snippet]:
            return list(reversed(results))

    results = [snippet(0, "a"), snippet(1, "aaa"), snippet(2, "aa")]
    assert isinstance(Reverse(), Reranker)
    chain = RerankChain([LengthScorer(), Reverse()])
    assert chain.name == "length,reverse"
    assert ids(chain.rerank("q", results)) == ["c000", "c002", "c001"]


def test_r6_a_failing_stage_keeps_the_previous_order_says_why_and_logs_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    results = [snippet(0, "a"), snippet(1, "aaa")]
    broken = LengthScorer(fail=True)
    chain = RerankChain([LengthScorer(), broken])
    with caplog.at_level(logging.INFO, logger="ragspine.retrieval.rerank.base"):
        first = chain.apply("q", results)
        second = chain.apply("q", results)
        broken.fail = False
        chain.apply("q", results)
    assert ids(first.results) == ["c001", "c000"]  # the first stage's order stands
    assert first.degraded_reasons == ("length: model down",) == second.degraded_reasons
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "model down" in warnings[0].getMessage()
    assert any("answers again" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("bad", ["invent", "repeat", "nan", "short", "move_restricted"])
def test_r6_a_stage_that_answers_garbage_is_ignored(bad: str) -> None:
    results = [snippet(0, "a"), snippet(1, "s", "RESTRICTED"), snippet(2, "aa")]

    class Broken:
        name = "broken"

        def rerank(self, query: str, given: Sequence[Snippet]) -> list[Snippet]:
            if bad == "invent":
                return [*given, snippet(9)]
            if bad == "repeat":
                return [given[0], given[0]]
            if bad == "move_restricted":
                return [given[1], given[0], given[2]]
            scorer = LengthScorer()
            scorer.score = lambda q, r: [float("nan")] * len(r) if bad == "nan" else [1.0]  # type: ignore[method-assign]
            return scorer.rerank(query, given)

    outcome = RerankChain([Broken()]).apply("q", results)
    assert outcome.results == results
    assert outcome.degraded_reasons and outcome.degraded_reasons[0].startswith("broken: ")
