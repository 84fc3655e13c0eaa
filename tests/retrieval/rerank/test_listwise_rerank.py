"""Listwise reranking: RESTRICTED text never reaches the judge (R1), failures keep the fused
order (R6), and the LLM judge works against a local OpenAI-API server."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragspine.llm import OpenAIChatProvider
from ragspine.retrieval.link.narrative_link import ProviderListwiseJudge
from ragspine.retrieval.rerank.listwise_rerank import (
    ListwiseJudge,
    build_listwise_prompt,
    listwise_rerank,
    parse_listwise_response,
)
from tests.openai_server import openai_server


def item(i: int, sensitivity: str = "PUBLIC") -> dict[str, Any]:
    return {"chunk_id": f"c{i}", "text": f"passage {i} ({sensitivity})", "sensitivity": sensitivity}


class SpyJudge:
    """Records what it was shown; answers reversed, or raises, or returns garbage."""

    def __init__(self, answer: str = "reverse") -> None:
        self.seen: list[list[str]] = []
        self.answer = answer

    def judge(self, query: str, candidates: list[str]) -> list[int]:
        self.seen.append(list(candidates))
        if self.answer == "raise":
            raise RuntimeError("model down")
        if self.answer == "garbage":
            return ["x", None]  # type: ignore[list-item]
        return list(reversed(range(len(candidates))))


@given(st.lists(st.sampled_from(["PUBLIC", "RESTRICTED", "restricted", "INTERNAL"]), max_size=14))
def test_r1_restricted_never_reaches_the_judge_and_keeps_its_position(labels: list[str]) -> None:
    results = [item(i, label) for i, label in enumerate(labels)]
    judge = SpyJudge()
    assert isinstance(judge, ListwiseJudge)
    out = listwise_rerank("q", results, judge, top_n=10)
    shown = [text for call in judge.seen for text in call]
    assert not any("RESTRICTED" in t.upper() for t in shown)
    assert sorted(r["chunk_id"] for r in out) == sorted(r["chunk_id"] for r in results)
    for position, result in enumerate(results):
        if result["sensitivity"].upper() == "RESTRICTED" or position >= 10:
            assert out[position] is result


def test_r50_the_judge_orders_the_open_subset() -> None:
    results = [item(0), item(1, "RESTRICTED"), item(2), item(3), item(4)]
    out = listwise_rerank("q", results, SpyJudge(), top_n=4)
    assert [r["chunk_id"] for r in out] == ["c3", "c1", "c2", "c0", "c4"]


def test_r50_all_restricted_never_calls_the_judge() -> None:
    judge = SpyJudge()
    results = [item(i, "RESTRICTED") for i in range(3)]
    assert listwise_rerank("q", results, judge) == results and judge.seen == []


@pytest.mark.parametrize("answer", ["raise", "garbage"])
def test_r6_a_failing_or_garbled_judge_keeps_the_fused_order(answer: str) -> None:
    results = [item(i) for i in range(5)]
    assert listwise_rerank("q", results, SpyJudge(answer)) == results


def test_parse_listwise_response_is_robust_to_noise() -> None:
    assert parse_listwise_response("[2, 0, 1]", 3) == [2, 0, 1]
    assert parse_listwise_response("Order: 3 > 1; the rest are weak", 4) == [3, 1, 0, 2]
    assert parse_listwise_response("[7, 1, 1]", 3) == [1, 0, 2]  # out of range, repeats
    assert parse_listwise_response("I cannot decide.", 3) == [0, 1, 2]


def test_build_listwise_prompt_numbers_the_passages() -> None:
    system, user = build_listwise_prompt("why?", ["first  text", "second"])
    assert system["role"] == "system" and "[2, 0, 1]" in system["content"]
    assert "Query: why?" in user["content"] and "[0] first text" in user["content"]
    assert "[1] second" in user["content"]


def completion(text: str) -> dict[str, Any]:
    return {"choices": [{"message": {"role": "assistant", "content": text}}]}


def test_r71_provider_judge_reranks_through_a_local_chat_server() -> None:
    def answer(path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
        return 200, completion("[2, 0, 1]")

    results = [item(0), item(1), item(2)]
    with openai_server(answer) as (url, seen):
        judge = ProviderListwiseJudge(OpenAIChatProvider(url, "judge"))
        out = listwise_rerank("q", results, judge)
    assert [r["chunk_id"] for r in out] == ["c2", "c0", "c1"]
    assert seen[0]["body"]["temperature"] == 0


def test_r6_r71_provider_errors_degrade_to_the_fused_order() -> None:
    def fail(path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
        return 500, "boom"

    results = [item(0), item(1), item(2)]
    with openai_server(fail) as (url, _):
        judge = ProviderListwiseJudge(OpenAIChatProvider(url, "judge", max_retries=0))
        assert listwise_rerank("q", results, judge) == results
