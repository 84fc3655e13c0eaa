"""Several knowledge bases at once (R31): routing that falls back instead of failing (R6), every
(query, base) pair in parallel, one fused list that is the same whatever the thread timing (R3),
and nothing RESTRICTED in front of a router or a caller without clearance (R1)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ragspine import Document, FilterError, KnowledgeBase
from ragspine.errors import InvalidArgumentError, KnowledgeBaseError
from ragspine.llm import OpenAIChatProvider
from ragspine.retrieval.lexical.fusion import DEFAULT_RRF_K
from ragspine.retrieval.link.narrative_link import SearchIndex
from ragspine.retrieval.link.snippet import ResultList, Snippet
from ragspine.retrieval.multi_index import (
    KeywordRouter,
    LLMRouter,
    MultiIndexRetriever,
    StaticRouter,
)
from ragspine.retrieval.rerank.base import Reranker
from tests.openai_server import openai_server
from tests.test_llm import completion, scripted

HOLIDAYS = "The office closes on 25 December for the holidays."
CORPORA = {
    "hr": [
        Document("leave", "Annual leave: every employee gets 25 days of paid leave per year.",
                 metadata={"year": 2024}),
        Document("parental", "Parental leave lasts 16 weeks at full pay.", metadata={"year": 2023}),
        Document("salaries", "Salary bands for 2024: engineers earn between 80k and 120k.",
                 sensitivity="RESTRICTED", metadata={"year": 2024}),
        Document("holidays", HOLIDAYS),
    ],
    "finance": [
        Document("revenue", "Revenue grew 12 percent in 2023 on strong subscription sales.",
                 metadata={"year": 2023}),
        Document("budget", "The travel budget for 2024 is frozen at last year's level.",
                 metadata={"year": 2024}),
        Document("forecast", "Confidential forecast: salary costs rise 9 percent in 2024.",
                 sensitivity="RESTRICTED", metadata={"year": 2024}),
        Document("holidays", HOLIDAYS),
    ],
    "eng": [
        Document("deploy", "Deployments run every Tuesday through the release pipeline."),
        Document("oncall", "The on-call engineer answers pages within 15 minutes of leave cover."),
    ],
}  # fmt: skip
TEXTS = [d.text for docs in CORPORA.values() for d in docs]
DESCRIPTIONS = {
    "hr": "Human resources: leave, holidays and pay",
    "finance": "Revenue, budgets and forecasts",
    "eng": "Engineering runbooks",
}


@pytest.fixture()
def kbs(tmp_path: Path) -> Iterator[dict[str, KnowledgeBase]]:
    opened = {name: KnowledgeBase(tmp_path / name) for name in CORPORA}
    for name, kb in opened.items():
        kb.add_documents(CORPORA[name])
    yield opened
    for kb in opened.values():
        kb.close()


class Wrapped:
    """A base that records its calls and can be slow, fail, degrade or ignore clearance."""

    def __init__(
        self,
        kb: KnowledgeBase,
        *,
        delay: float = 0.0,
        error: Exception | None = None,
        degraded: Sequence[str] = (),
        leak: bool = False,
    ) -> None:
        self.kb, self.delay, self.error, self.degraded, self.leak = kb, delay, error, degraded, leak
        self.calls: list[str] = []

    def search(
        self,
        query: str,
        *,
        top_k: int = 10,
        filters: Mapping[str, Any] | None = None,
        doc_ids: Sequence[str] | None = None,
        mode: str | None = None,
        rerank: str | Reranker | None = None,
        include_restricted: bool = True,
    ) -> ResultList[Snippet]:
        self.calls.append(query)
        time.sleep(self.delay)
        if self.error is not None:
            raise self.error
        found = self.kb.search(
            query,
            top_k=top_k,
            filters=filters,
            mode=mode,
            rerank=rerank,
            include_restricted=include_restricted or self.leak,
        )
        return ResultList(found, degraded_reasons=(*found.degraded_reasons, *self.degraded))


def dicts(found: Sequence[Snippet]) -> str:
    return json.dumps([s.to_dict() for s in found], sort_keys=True)


def test_r31_results_of_every_base_are_tagged_and_fused_by_rrf(
    kbs: dict[str, KnowledgeBase],
) -> None:
    with MultiIndexRetriever(kbs) as retriever:
        found = retriever.search("leave budget revenue", top_k=10)
    assert {s.library_id for s in found} == {"hr", "finance", "eng"}
    assert all(s.to_dict()["library_id"] == s.library_id for s in found)
    assert found.queries == ("leave budget revenue",) and not found.routing_fallback
    assert not found.degraded
    # one query: each base's first result scores 1/(k+1); bm25 is the base's own score
    firsts = [s for s in found if s.scores["fused"] == pytest.approx(1 / (DEFAULT_RRF_K + 1))]
    assert sorted(s.library_id or "" for s in firsts) == ["eng", "finance", "hr"]
    own = kbs["hr"].search("leave budget revenue", top_k=1)[0]
    hr_first = next(s for s in firsts if s.library_id == "hr")
    assert hr_first.chunk_id == own.chunk_id and hr_first.scores["bm25"] == own.scores["bm25"]


def test_r3_ties_are_broken_by_base_then_chunk_and_cut_to_top_k(
    kbs: dict[str, KnowledgeBase],
) -> None:
    with MultiIndexRetriever(kbs) as retriever:
        found = retriever.search("leave budget revenue", top_k=4)
    keys = [(-(s.scores["fused"] or 0.0), s.library_id or "", s.chunk_id) for s in found]
    assert len(found) == 4 and keys == sorted(keys)
    assert [s.library_id for s in found[:3]] == ["eng", "finance", "hr"]  # equal 1/(k+1)


def test_r31_a_static_router_searches_its_bases_only(kbs: dict[str, KnowledgeBase]) -> None:
    spies = {name: Wrapped(kb) for name, kb in kbs.items()}
    with MultiIndexRetriever(spies, StaticRouter(["finance", "hr"])) as retriever:
        found = retriever.search("leave budget")
    assert {s.library_id for s in found} == {"hr", "finance"} and not found.routing_fallback
    assert spies["eng"].calls == [] and spies["hr"].calls == ["leave budget"]


def test_r6_a_router_naming_an_unknown_base_is_an_error_at_construction(
    kbs: dict[str, KnowledgeBase],
) -> None:
    with pytest.raises(InvalidArgumentError, match=r"unknown knowledge bases \['legal'\]"):
        MultiIndexRetriever(kbs, StaticRouter(["hr", "legal"]))
    with pytest.raises(InvalidArgumentError, match="legal"):
        MultiIndexRetriever(kbs, KeywordRouter({"legal": ["contract"]}))
    with pytest.raises(InvalidArgumentError, match="non-empty strings"):
        KeywordRouter({"hr": "leave"})  # a string is not a list of keywords


def test_r31_keyword_router_matches_whole_ascii_words_and_cjk_substrings() -> None:
    router = KeywordRouter({"hr": ["Leave", "年假"], "finance": ["budget", "on call"]})
    names = ["hr", "finance", "eng"]
    assert router.route("How much LEAVE is left?", names) == ["hr"]
    assert router.route("the budget's owner", names) == ["finance"]
    assert router.route("cleaves and budgets", names) == names  # no whole word: every base
    assert router.route("我的年假还有几天", names) == ["hr"]  # no spaces in Chinese: substring
    assert router.route("who is on call, and on leave?", names) == ["hr", "finance"]


def test_r31_keyword_routing_runs_end_to_end(kbs: dict[str, KnowledgeBase]) -> None:
    router = KeywordRouter({"hr": ["leave"], "finance": ["budget"], "eng": ["deploy"]})
    with MultiIndexRetriever(kbs, router) as retriever:
        found = retriever.search("parental leave weeks")
        everywhere = retriever.search("pay")
    assert {s.library_id for s in found} == {"hr"} and found[0].doc_id == "parental"
    assert not everywhere.routing_fallback  # nothing matched: every base, by design


def test_r31_llm_router_picks_bases_and_never_sees_document_text(
    kbs: dict[str, KnowledgeBase],
) -> None:
    answer = 'Search these:\n```json\n["finance", "legal"]\n```'
    with openai_server(scripted((200, completion(answer)))) as (url, seen):
        router = LLMRouter(OpenAIChatProvider(url, "router"), DESCRIPTIONS)
        with MultiIndexRetriever(kbs, router) as retriever:
            found = retriever.search(["travel budget 2024", "revenue growth"])
    assert {s.library_id for s in found} == {"finance"} and not found.routing_fallback
    assert len(seen) == 1  # one routing call for all the queries
    body = seen[0]["body"]
    prompt = json.dumps(body["messages"])
    assert body["temperature"] == 0
    assert "travel budget 2024" in prompt and "revenue growth" in prompt
    assert all(f"{n}: {d}" in prompt for n, d in DESCRIPTIONS.items())
    assert not any(text in prompt for text in TEXTS)  # the router sees no chunk text (R1)


@pytest.mark.parametrize(
    ("reply", "delay"),
    [
        ((200, completion("finance and hr, I think")), 0.0),  # no JSON list
        ((200, completion('["legal"]')), 0.0),  # no configured base
        ((500, "boom"), 0.0),
        ((200, completion('["hr"]')), 0.6),  # beyond the provider's timeout
    ],
    ids=["garbage", "unknown-names", "http-500", "too-slow"],
)
def test_r6_a_failing_llm_router_falls_back_to_every_base(
    kbs: dict[str, KnowledgeBase], reply: tuple[int, Any], delay: float
) -> None:
    with openai_server(scripted(reply, delay=delay)) as (url, _):
        provider = OpenAIChatProvider(url, "router", timeout=0.2, max_retries=0)
        with MultiIndexRetriever(kbs, LLMRouter(provider, DESCRIPTIONS)) as retriever:
            start = time.perf_counter()
            found = retriever.search("leave budget deployments")
            elapsed = time.perf_counter() - start
    assert found.routing_fallback and {s.library_id for s in found} == set(CORPORA)
    assert any("knowledge base" in reason for reason in found.degraded_reasons)
    assert elapsed < 0.5  # the provider's timeout bounds the routing call


class Raising:
    def route(self, query: str, names: Sequence[str]) -> list[str]:
        raise RuntimeError("router down")


class Answering:
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def route(self, query: str, names: Sequence[str]) -> Any:
        return self.answer


@pytest.mark.parametrize(
    "router", [Raising(), Answering(None), Answering([]), Answering([{"hr": 1}]), Answering("hr")]
)
def test_r6_any_router_failure_searches_every_base(
    kbs: dict[str, KnowledgeBase], router: Any
) -> None:
    with MultiIndexRetriever(kbs, router) as retriever:
        found = retriever.search("leave budget deployments")
    assert found.routing_fallback and {s.library_id for s in found} == set(CORPORA)
    assert len(found.degraded_reasons) == 1


def test_r31_sub_questions_times_bases_run_concurrently(kbs: dict[str, KnowledgeBase]) -> None:
    slow = {name: Wrapped(kb, delay=0.2) for name, kb in kbs.items()}
    queries = ["annual leave days", "travel budget", "release pipeline"]
    with MultiIndexRetriever(slow, max_workers=9) as retriever:
        start = time.perf_counter()
        found = retriever.search(queries, top_k=5)
        elapsed = time.perf_counter() - start
    assert elapsed < 0.9, f"9 searches of 0.2 s took {elapsed:.2f} s: not concurrent"
    assert all(sorted(spy.calls) == sorted(queries) for spy in slow.values())
    assert found.queries == tuple(queries) and {s.library_id for s in found} == set(CORPORA)


def test_r3_the_merge_is_identical_whatever_the_thread_timing(
    kbs: dict[str, KnowledgeBase],
) -> None:
    queries = ["leave", "budget 2024", "leave pay", "salary"]
    runs = []
    for delays, workers in (((0.0, 0.03, 0.06), 8), ((0.06, 0.03, 0.0), 8), ((0.0,) * 3, 1)):
        bases = {name: Wrapped(kb, delay=d) for (name, kb), d in zip(kbs.items(), delays)}
        for fusion in ("rrf", "content_max"):
            with MultiIndexRetriever(bases, fusion=fusion, max_workers=workers) as retriever:
                runs.append((fusion, dicts(retriever.search(queries, top_k=8))))
    assert len({text for fusion, text in runs if fusion == "rrf"}) == 1
    assert len({text for fusion, text in runs if fusion == "content_max"}) == 1


def test_r31_content_max_merges_identical_text_across_bases(
    kbs: dict[str, KnowledgeBase],
) -> None:
    query = ["office closes holidays", "25 December"]
    with MultiIndexRetriever(kbs) as rrf, MultiIndexRetriever(kbs, fusion="content_max") as cmax:
        by_rrf, by_max = rrf.search(query), cmax.search(query)
    assert [s.library_id for s in by_rrf if s.text == HOLIDAYS] == ["finance", "hr"]
    merged = [s for s in by_max if s.text == HOLIDAYS]
    # equal best scores in both bases: the first base by name stands for the text
    assert len(merged) == 1 and merged[0].library_id == "finance"
    assert merged[0].scores["fused"] == max(
        s.scores["fused"] or 0.0
        for name in ("hr", "finance")
        for q in query
        for s in kbs[name].search(q)
        if s.text == HOLIDAYS
    )


def test_r1_content_max_keeps_restricted_when_any_copy_is(tmp_path: Path) -> None:
    text = "Merger talks with Initech start in May."
    with (
        KnowledgeBase(tmp_path / "a") as open_kb,
        KnowledgeBase(tmp_path / "b") as closed_kb,
    ):
        open_kb.add_documents([Document("m", text)])
        closed_kb.add_documents([Document("m", text, sensitivity="RESTRICTED")])
        bases = {"a": open_kb, "b": closed_kb}
        with MultiIndexRetriever(bases, fusion="content_max") as retriever:
            cleared = retriever.search("merger talks")
            uncleared = retriever.search("merger talks", include_restricted=False)
    assert len(cleared) == 1 and cleared[0].library_id == "a"
    assert cleared[0].sensitivity == "RESTRICTED"
    assert [s.sensitivity for s in uncleared] == ["PUBLIC"]


def test_r1_without_clearance_no_base_returns_restricted_chunks(
    kbs: dict[str, KnowledgeBase],
) -> None:
    query = "salary bands, confidential forecast, travel budget, annual leave"
    with MultiIndexRetriever(kbs) as retriever:
        cleared = retriever.search(query)
        uncleared = retriever.search(query, include_restricted=False)
    assert {s.doc_id for s in cleared if s.sensitivity == "RESTRICTED"} == {"salaries", "forecast"}
    assert uncleared and all(s.sensitivity != "RESTRICTED" for s in uncleared)
    leaky = {name: Wrapped(kb, leak=True) for name, kb in kbs.items()}  # ignores clearance
    with MultiIndexRetriever(leaky) as retriever:
        found = retriever.search(query, include_restricted=False)
    assert found and all(s.sensitivity != "RESTRICTED" for s in found)


def test_r6_bad_input_is_a_clear_error_before_any_search(kbs: dict[str, KnowledgeBase]) -> None:
    spies = {name: Wrapped(kb) for name, kb in kbs.items()}
    with MultiIndexRetriever(spies) as retriever:
        with pytest.raises(FilterError, match="year"):
            retriever.search("leave", filters={"year": {"bogus": 1}})
        assert all(spy.calls == [] for spy in spies.values())
        for query in ([], [1], b"leave"):
            with pytest.raises(InvalidArgumentError, match="query"):
                retriever.search(query)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="needs an embedding"):
            retriever.search("leave", mode="vector")  # every base is lexical
        with pytest.raises(InvalidArgumentError, match="top_k"):
            retriever.search("leave", top_k=0)
        narrowed = retriever.search("leave budget", filters={"year": 2023})
    assert {s.doc_id for s in narrowed} == {"parental"}  # filters narrow in every base


def test_r6_a_failing_base_is_left_out_and_degraded_reasons_are_carried(
    kbs: dict[str, KnowledgeBase],
) -> None:
    bases: dict[str, SearchIndex] = {
        "hr": Wrapped(kbs["hr"], degraded=["vector channel failed: model gone"]),
        "finance": Wrapped(kbs["finance"], error=KnowledgeBaseError("disk on fire")),
        "eng": kbs["eng"],
    }
    with MultiIndexRetriever(bases) as retriever:
        found = retriever.search(["leave budget", "pipeline"])
    assert {s.library_id for s in found} == {"hr", "eng"}
    assert found.degraded_reasons == (
        "hr: vector channel failed: model gone",
        "finance: search failed: disk on fire",
    )


def test_r6_bad_construction_is_a_clear_error(kbs: dict[str, KnowledgeBase]) -> None:
    with pytest.raises(InvalidArgumentError, match="at least one"):
        MultiIndexRetriever({})
    with pytest.raises(InvalidArgumentError, match="fusion"):
        MultiIndexRetriever(kbs, fusion="max")
    with pytest.raises(InvalidArgumentError, match="max_workers"):
        MultiIndexRetriever(kbs, max_workers=0)
    retriever = MultiIndexRetriever(kbs)
    retriever.close()
    with pytest.raises(RuntimeError):
        retriever.search("leave")  # a closed retriever has no pool left
