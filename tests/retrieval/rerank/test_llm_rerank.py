"""LLM rerankers (R53) against a real local OpenAI-API server: yes/no filter, 0–10 grades, only
the first top_n sent, never RESTRICTED text (R1), failures visible (R6)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ragspine.errors import InvalidArgumentError
from ragspine.llm import OpenAIChatProvider, json_list
from ragspine.retrieval.rerank.base import RerankChain
from ragspine.retrieval.rerank.cross_encoder import make_reranker
from ragspine.retrieval.rerank.llm_rerank import LLMFilterReranker, LLMScoreReranker
from tests.openai_server import openai_server
from tests.retrieval.rerank.helpers import ids, snippet

RESULTS = [snippet(0, "alpha"), snippet(1, "classified", "Restricted"), snippet(2, "beta"),
           snippet(3, "gamma"), snippet(4, "delta")]  # fmt: skip


def answering(text: str):  # type: ignore[no-untyped-def]
    def handle(path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
        return 200, {"choices": [{"message": {"role": "assistant", "content": text}}]}

    return handle


def prompts(seen: list[dict[str, Any]]) -> str:
    return json.dumps([r["body"]["messages"] for r in seen])


def test_r53_the_filter_keeps_what_the_model_calls_relevant() -> None:
    with openai_server(answering("Relevant: [2, 0]")) as (url, seen):
        reranker = LLMFilterReranker(OpenAIChatProvider(url, "m"), top_n=4)
        out = reranker.rerank("q", RESULTS)
    # open passages sent: alpha, beta, gamma (top_n = 4 cuts delta before the call)
    assert ids(out) == ["c000", "c001", "c003"]
    assert "classified" not in prompts(seen) and "delta" not in prompts(seen)
    assert seen[0]["body"]["temperature"] == 0


def test_r53_the_filter_falls_back_to_the_top_n_when_everything_is_filtered_out() -> None:
    with openai_server(answering("```json\n[]\n```")) as (url, _):
        out = LLMFilterReranker(OpenAIChatProvider(url, "m"), top_n=3).rerank("q", RESULTS)
    assert ids(out) == ["c000", "c001", "c002"]


def test_r53_grades_normalise_to_0_1_and_order_the_open_snippets() -> None:
    with openai_server(answering("Grades: [3, 10, 7, 12]")) as (url, seen):
        reranker = LLMScoreReranker(OpenAIChatProvider(url, "m"), top_n=5)
        out = reranker.rerank("q", RESULTS)
    assert ids(out) == ["c002", "c001", "c004", "c003", "c000"]
    assert [s.scores.get("rerank") for s in out] == [1.0, None, 1.0, 0.7, 0.3]
    assert "classified" not in prompts(seen)


def test_r53_grades_can_be_shown_without_reordering() -> None:
    with openai_server(answering("[3, 10, 7, 0]")) as (url, _):
        reranker = LLMScoreReranker(OpenAIChatProvider(url, "m"), reorder=False)
        out = reranker.rerank("q", RESULTS)
    assert ids(out) == ids(RESULTS)
    assert [s.scores.get("rerank") for s in out] == [0.3, None, 1.0, 0.7, 0.0]


@pytest.mark.parametrize("answer", ["I cannot help", "[1, 2]", '["high", "low", "x", "y"]', "[}"])
def test_r6_unreadable_grades_keep_the_order_and_say_so(answer: str) -> None:
    with openai_server(answering(answer)) as (url, _):
        chain = RerankChain([LLMScoreReranker(OpenAIChatProvider(url, "m"))])
        outcome = chain.apply("q", RESULTS)
    assert outcome.results == RESULTS
    assert outcome.degraded_reasons[0].startswith("llm_score: ")


def test_r6_a_failing_model_keeps_the_order_and_says_so() -> None:
    with openai_server(lambda *_: (500, "boom")) as (url, seen):
        provider = OpenAIChatProvider(url, "m", max_retries=1, backoff=0.0)
        outcome = RerankChain([LLMFilterReranker(provider)]).apply("q", RESULTS)
    assert outcome.results == RESULTS and "HTTP 500" in outcome.degraded_reasons[0]
    assert len(seen) == 2


def test_r53_no_model_call_when_nothing_open_is_left() -> None:
    only_restricted = [snippet(1, "classified", "RESTRICTED")]
    with openai_server(answering("[0]")) as (url, seen):
        provider = OpenAIChatProvider(url, "m")
        assert LLMFilterReranker(provider).rerank("q", only_restricted) == only_restricted
        assert LLMScoreReranker(provider).rerank("q", only_restricted) == only_restricted
    assert seen == []


def test_r53_factory_uses_the_configured_chat_model(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InvalidArgumentError, match="RAGSPINE_LLM_BASE_URL"):
        make_reranker("llm_filter")
    monkeypatch.setenv("RAGSPINE_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("RAGSPINE_LLM_MODEL", "m")
    chain = make_reranker("llm_filter, llm_score:show ,listwise")
    assert chain is not None and chain.name == "llm_filter,llm_score,listwise"
    assert chain.stages[1].reorder is False  # type: ignore[attr-defined]


def test_json_list_takes_the_last_list_in_prose() -> None:
    assert json_list("I think [1] then... final: [0, 2]") == [0, 2]
