"""R1, property-based: RESTRICTED text never reaches a prompt (exit 1) and never leaves the link
(exit 2), whatever the corpus, the labels' casing, the query, the mode or the reranker chain.

Every model here is real code talking HTTP to a spy server on 127.0.0.1 that records every
request: the chat model behind ``llm_filter``, ``llm_score`` and ``listwise``, and a ``/rerank``
service. Each RESTRICTED document carries a marker word that appears nowhere else (not in open
documents, not in queries); the marker must appear in no request and in no snippet or context
the link returns. Cases = queries run; the suite asserts it ran at least 10,000.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragspine import Document, KnowledgeBase
from ragspine.llm import OpenAIChatProvider
from ragspine.retrieval.link.narrative_link import NarrativeIndexRetriever, format_context
from ragspine.retrieval.query import CorrectiveGrade, QueryPipeline, SafetyGate
from ragspine.retrieval.rerank.base import RerankChain
from ragspine.retrieval.rerank.cross_encoder import make_reranker
from tests.openai_server import openai_server

pytestmark = pytest.mark.slow

EXAMPLES = 1000
QUERIES_PER_EXAMPLE = 10
REQUIRED_CASES = 10_000
VOCABULARY = ["revenue", "widget", "demand", "forecast", "acme", "growth", "营收", "预测", "需求",
              "2024", "margin", "plan", "cost", "成本"]  # fmt: skip
RESTRICTED_LABELS = ["RESTRICTED", "restricted", "Restricted", " rEsTrIcTeD ", "RESTRICTED\n"]
OPEN_LABELS = ["PUBLIC", "internal", "Confidential", ""]
MODES = ["bm25", "hybrid", "vector", "auto"]
STAGES = ["llm_filter", "llm_score", "llm_score:show", "listwise", "http",
          "embedding:deterministic"]  # fmt: skip
_PASSAGE = re.compile(r"^\[(\d+)\] ", re.MULTILINE)


def marker(n: int) -> str:
    return f"zqxsecret{n}marker"


def spy_model(path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
    """Answers like a cooperative model: some order, some grades, some relevant passages."""
    if path == "/v1/rerank":
        documents = body["documents"]
        return 200, {"results": [{"index": i, "relevance_score": len(d) % 7}
                                 for i, d in enumerate(documents)]}  # fmt: skip
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    if user.startswith("Question: "):  # a query transform: it echoes what it was shown
        answer = transform_answer(system, user)
        return 200, {"choices": [{"message": {"role": "assistant", "content": answer}}]}
    n = len(_PASSAGE.findall(user))
    if system.startswith("You grade"):
        answer = [(i * 7) % 11 for i in range(n)]
    elif system.startswith("You judge"):
        answer = list(range(0, n, 2))
    else:
        answer = list(reversed(range(n)))
    return 200, {"choices": [{"message": {"role": "assistant", "content": json.dumps(answer)}}]}


def is_restricted_label(label: str) -> bool:
    """The test's own reading of R1's rule (not the code under test)."""
    return label.strip().upper() == "RESTRICTED"


@contextmanager
def generated_kb(
    corpus: list[tuple[list[str], str]],
) -> Iterator[tuple[KnowledgeBase, list[str]]]:
    """A knowledge base of the generated documents (each RESTRICTED one carrying its own
    marker word), and those markers."""
    markers = [marker(i) for i, (_, label) in enumerate(corpus) if is_restricted_label(label)]
    with (
        tempfile.TemporaryDirectory() as scratch,
        KnowledgeBase(Path(scratch) / "kb", embedding="deterministic") as kb,
    ):
        kb.add_documents(
            Document(
                f"d{i}",
                " ".join(words) + (f" {marker(i)}" if is_restricted_label(label) else ""),
                sensitivity=label or "PUBLIC",
                metadata={"year": 2024},
            )
            for i, (words, label) in enumerate(corpus)
        )
        yield kb, markers


def transform_answer(system: str, user: str) -> str:
    """Rewrites, passages, sub-questions made of the words the model was shown: if a transform
    ever showed it RESTRICTED text, the marker would come back as a query."""
    words = user.removeprefix("Question: ").split()
    if system.startswith("Rewrite the question into"):
        return json.dumps([" ".join(reversed(words)), " ".join(words[:2]) + " overview"])
    if system.startswith("Break the question"):
        halves = [" ".join(words[: len(words) // 2 or 1]), " ".join(words[len(words) // 2 :])]
        return json.dumps({"sub_questions": [{"question": h, "reasoning": "part"}
                                             for h in halves if h]})  # fmt: skip
    if system.startswith("Does answering"):
        return "complex" if len(words) > 2 else "simple"
    return " ".join(words * 3)  # a HyDE passage or a step-back question


documents = st.lists(
    st.tuples(
        st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=12),
        st.one_of(st.sampled_from(RESTRICTED_LABELS), st.sampled_from(OPEN_LABELS)),
    ),
    min_size=1,
    max_size=7,
)
queries = st.lists(
    st.tuples(
        st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=4).map(" ".join),
        st.sampled_from(MODES),
        st.lists(st.sampled_from(STAGES), min_size=1, max_size=3).map(",".join),
        st.sampled_from([None, {"year": 2024}, {"year": {"gte": 2030}}]),
        st.integers(1, 8),
    ),
    min_size=QUERIES_PER_EXAMPLE,
    max_size=QUERIES_PER_EXAMPLE,
)


@pytest.fixture(scope="module")
def spy() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    with openai_server(spy_model) as served:
        yield served


def test_r1_restricted_text_never_reaches_a_prompt_or_leaves_the_link(
    spy: tuple[str, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, seen = spy
    monkeypatch.setenv("RAGSPINE_RERANK_BASE_URL", url)
    provider = OpenAIChatProvider(url, "spy", timeout=10)
    chains: dict[str, RerankChain | None] = {}
    cases = 0

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(documents, queries)
    def check(corpus: list[tuple[list[str], str]], asked: list[tuple[Any, ...]]) -> None:
        nonlocal cases
        with generated_kb(corpus) as (kb, markers):
            for query, mode, spec, filters, top_k in asked:
                if spec not in chains:
                    chains[spec] = make_reranker(spec, provider=provider)
                chain = chains[spec]
                first_request = len(seen)
                # a caller with clearance: RESTRICTED may come back, but no model sees it
                kb.search(query, top_k=top_k, mode=mode, rerank=chain, filters=filters)
                link = NarrativeIndexRetriever(kb, reranker=chain, mode=mode)
                snippets = link.retrieve(query, filters=filters, top_k=top_k)
                exposed = json.dumps([r["body"] for r in seen[first_request:]])
                exposed += json.dumps(list(snippets), ensure_ascii=False)
                exposed += format_context(snippets)
                leaked = [m for m in markers if m in exposed]
                assert not leaked, f"RESTRICTED text leaked for {query!r}, {mode}, {spec}"
                assert not any(is_restricted_label(s["sensitivity"]) for s in snippets)
                cases += 1

    check()
    assert cases >= REQUIRED_CASES, f"only {cases} cases ran"
    assert len(seen) > REQUIRED_CASES  # the models really were asked, many times


TRANSFORM_EXAMPLES = 150
PIPELINES = st.fixed_dictionaries(
    {
        "transform": st.sampled_from([None, "multi_query", "rag_fusion", "hyde", "step_back"]),
        "decompose": st.booleans(),
        "adaptive": st.sampled_from([None, "heuristic", "llm"]),
        "corrective": st.booleans(),
    }
)


def test_r1_query_transforms_never_show_a_model_restricted_text(
    spy: tuple[str, list[dict[str, Any]]],
) -> None:
    """The LLM transforms (R41–R44) see only the user's question: with RESTRICTED chunks in the
    candidate lists of a cleared caller, no request, generated query or gated rewrite holds a
    marker. Cases = queries run (at least 1,500)."""
    url, seen = spy
    provider = OpenAIChatProvider(url, "spy", timeout=10)
    cases = 0

    @settings(
        max_examples=TRANSFORM_EXAMPLES,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(documents, queries, PIPELINES)
    def check(
        corpus: list[tuple[list[str], str]], asked: list[tuple[Any, ...]], options: dict[str, Any]
    ) -> None:
        nonlocal cases
        with generated_kb(corpus) as (kb, markers):
            gate, grade = SafetyGate(["acme"]), CorrectiveGrade(min_bm25=1.0)
            pipeline = QueryPipeline(kb, provider=provider, gate=gate, grade=grade, **options)
            try:
                for query, mode, _, filters, top_k in asked:
                    first_request = len(seen)
                    found = pipeline.search(query, top_k=top_k, mode=mode, filters=filters)
                    exposed = json.dumps([r["body"] for r in seen[first_request:]])
                    exposed += json.dumps([*found.queries, *found.rejected_queries])
                    assert not [m for m in markers if m in exposed], (query, options)
                    assert all("acme" not in q.lower() or q == query for q in found.queries)
                    cases += 1
            finally:
                pipeline.close()

    check()
    assert cases >= TRANSFORM_EXAMPLES * QUERIES_PER_EXAMPLE, f"only {cases} cases ran"
