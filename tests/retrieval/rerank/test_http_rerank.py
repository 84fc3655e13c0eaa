"""The ``/rerank`` client (R52) against a real local HTTP server: the Jina/Cohere request shape,
the key, RESTRICTED never sent (R1), and visible degradation when the service fails (R6)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from ragspine.errors import InvalidArgumentError
from ragspine.retrieval.rerank.base import RerankChain
from ragspine.retrieval.rerank.cross_encoder import make_reranker
from ragspine.retrieval.rerank.http_rerank import HttpReranker, read_rerank_reply
from tests.openai_server import openai_server
from tests.retrieval.rerank.helpers import ids, snippet

RESULTS = [snippet(0, "short"), snippet(1, "top secret plans", "RESTRICTED"),
           snippet(2, "a much longer passage"), snippet(3, "medium text")]  # fmt: skip


def by_length(path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
    """A rerank service that prefers longer documents, answering best first as services do."""
    if path != "/v1/rerank":
        return 404, {"error": "not found"}
    if headers.get("authorization") != "Bearer rk-test":
        return 401, {"error": "bad key"}
    ranked = sorted(range(len(body["documents"])), key=lambda i: -len(body["documents"][i]))
    results = [{"index": i, "relevance_score": len(body["documents"][i]) / 100} for i in ranked]
    return 200, {"model": body.get("model"), "results": results[: body["top_n"]]}


def test_r52_the_service_orders_the_open_snippets(monkeypatch: pytest.MonkeyPatch) -> None:
    with openai_server(by_length) as (url, seen):
        monkeypatch.setenv("RAGSPINE_RERANK_BASE_URL", url)
        monkeypatch.setenv("RAGSPINE_RERANK_API_KEY", "rk-test")
        monkeypatch.setenv("RAGSPINE_RERANK_MODEL", "jina-reranker-v2")
        chain = make_reranker("http")
        assert chain is not None
        outcome = chain.apply("q", RESULTS)
    assert ids(outcome.results) == ["c002", "c001", "c003", "c000"]  # RESTRICTED stays 2nd
    assert outcome.results[0].scores["rerank"] == pytest.approx(0.21)
    assert not outcome.degraded_reasons
    documents = ["short", "a much longer passage", "medium text"]
    assert seen[0]["body"] == {"model": "jina-reranker-v2", "query": "q", "top_n": 3,
                               "documents": documents}  # fmt: skip


@pytest.mark.parametrize(
    "reply",
    [
        (200, {"results": [{"index": 7, "relevance_score": 1}]}),
        (200, {"results": [{"index": 0}]}),
        (200, {"data": []}),
        (200, "not json"),
        (401, {"error": "no key"}),
        (503, {"error": "overloaded"}),
    ],
)
def test_r6_garbage_refusals_and_outages_keep_the_order_and_say_so(reply: tuple[int, Any]) -> None:
    with openai_server(lambda *_: reply) as (url, _):
        outcome = RerankChain([HttpReranker(url, backoff=0.0)]).apply("q", RESULTS)
    assert outcome.results == RESULTS
    assert len(outcome.degraded_reasons) == 1 and outcome.degraded_reasons[0].startswith("http: ")


def test_r6_a_missing_key_degrades_visibly_instead_of_skipping() -> None:
    with openai_server(by_length) as (url, _):
        outcome = RerankChain([HttpReranker(url)]).apply("q", RESULTS)
    assert outcome.results == RESULTS and "HTTP 401" in outcome.degraded_reasons[0]


def test_r6_a_down_or_slow_service_adds_at_most_its_timeout() -> None:
    def slow(*_: Any) -> tuple[int, Any]:
        time.sleep(1.0)
        return 200, {"results": []}

    with openai_server(slow) as (url, _):
        start = time.perf_counter()
        outcome = RerankChain([HttpReranker(url, timeout=0.3, max_retries=3)]).apply("q", RESULTS)
        assert time.perf_counter() - start < 0.6
    assert outcome.results == RESULTS and "Timeout" in outcome.degraded_reasons[0]
    down = RerankChain([HttpReranker("http://127.0.0.1:9/v1", timeout=0.5)]).apply("q", RESULTS)
    assert down.results == RESULTS and down.degraded_reasons


def test_r52_replies_in_the_tei_shape_and_partial_replies_are_read() -> None:
    assert read_rerank_reply([{"index": 1, "score": 0.9}, {"index": 0, "score": 0.1}], 2) == [
        0.1,
        0.9,
    ]
    assert read_rerank_reply({"results": [{"index": 1, "relevance_score": 0.5}]}, 3) == [
        -0.5,
        0.5,
        -0.5,
    ]


def test_r52_configuration_errors_are_clear() -> None:
    with pytest.raises(InvalidArgumentError, match="RAGSPINE_RERANK_BASE_URL"):
        make_reranker("http")
    with pytest.raises(InvalidArgumentError, match="http"):
        HttpReranker("ftp://x")
    assert HttpReranker("http://h/v1/rerank").url == "http://h/v1/rerank"
