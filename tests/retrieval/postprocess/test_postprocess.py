"""Post-processing (R60): MMR, lost-in-the-middle, extractive compression into prompt_text;
text and citations never change (R2); off means byte-identical (R5)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ragspine import Document, KnowledgeBase
from ragspine.errors import InvalidArgumentError
from ragspine.retrieval.link.narrative_link import (
    NarrativeIndexRetriever,
    build_narrative_retriever,
    format_context,
)
from ragspine.retrieval.postprocess import (
    MMR,
    ExtractiveCompressor,
    LostInTheMiddle,
    make_postprocessor,
)
from ragspine.retrieval.vector.embedding_backends import DeterministicEmbedding
from tests.retrieval.rerank.helpers import ids, snippet

LONG = ("Solar panels convert sunlight. Wind turbines spin offshore. Batteries store the "
        "surplus for the night. Grid operators balance supply and demand every second. "
        "Hydro dams release water when prices peak. Heat pumps move warmth indoors in winter. "
        "Transmission lines carry power across the country to the cities that need it most. "
        "Smart meters report use every fifteen minutes to the utility.")  # fmt: skip


def test_r5_nothing_named_means_no_post_processing() -> None:
    assert make_postprocessor() is None and make_postprocessor("none") is None
    with pytest.raises(InvalidArgumentError, match="unknown post-processor"):
        make_postprocessor("summarise")
    with pytest.raises(InvalidArgumentError, match="λ"):
        MMR(DeterministicEmbedding(), lambda_=1.5)


def test_r60_lost_in_the_middle_puts_the_best_at_both_ends() -> None:
    results = [snippet(i) for i in range(6)]
    assert ids(LostInTheMiddle().process("q", [*results, snippet(9)], 6)) == [
        "c000", "c002", "c004", "c005", "c003", "c001",
    ]  # fmt: skip


def test_r60_mmr_pushes_near_duplicates_down() -> None:
    texts = ["solar panels on roofs", "solar panels on roofs today", "wind turbines at sea",
             "hydro dams in valleys"]  # fmt: skip
    results = [snippet(i, t, fused=1.0 - i / 10) for i, t in enumerate(texts)]
    diverse = MMR(DeterministicEmbedding(), lambda_=0.5).process("energy", results, 4)
    assert ids(diverse)[0] == "c000" and ids(diverse).index("c001") == 3
    assert "c001" not in ids(MMR(DeterministicEmbedding(), lambda_=0.5).process("e", results, 3))
    assert MMR(DeterministicEmbedding(), lambda_=1.0).process("energy", results, 4) == results


@given(st.text(min_size=0, max_size=600), st.integers(20, 400))
def test_r2_compression_only_fills_prompt_text(text: str, budget: int) -> None:
    original = snippet(0, text or "x")
    (compressed,) = ExtractiveCompressor(budget_chars=budget).process("solar wind", [original], 5)
    assert compressed.text == original.text
    assert compressed.source_locator == original.source_locator
    assert compressed.prompt_text is not None
    assert compressed.prompt_text.strip() or not original.text.strip()
    for piece in compressed.prompt_text.split(" … "):
        assert piece in original.text or all(p in original.text for p in piece.split(" "))


def test_r60_compression_keeps_the_sentences_about_the_query_within_budget() -> None:
    compressor = ExtractiveCompressor(budget_chars=80)
    assert compressor.compress("wind turbines batteries", LONG) == (
        "Wind turbines spin offshore. Batteries store the surplus for the night."
    )
    assert compressor.compress("hydro prices", LONG) == "Hydro dams release water when prices peak."
    assert ExtractiveCompressor(budget_chars=1000).compress("x", LONG) == LONG


@pytest.fixture()
def kb(tmp_path: Path) -> Iterator[KnowledgeBase]:
    with KnowledgeBase(tmp_path / "kb", embedding="deterministic") as knowledge_base:
        knowledge_base.add_documents(
            [Document("energy", LONG, title="Energy"), Document("solar", "Solar panels.")]
        )
        yield knowledge_base


def test_r5_the_link_without_post_processing_is_byte_identical(kb: KnowledgeBase) -> None:
    plain = NarrativeIndexRetriever(kb).retrieve("wind batteries")
    none = NarrativeIndexRetriever(kb, postprocessor=make_postprocessor("none")).retrieve(
        "wind batteries"
    )
    assert json.dumps(list(plain)) == json.dumps(list(none))
    assert all("prompt_text" not in s for s in plain)


def test_r60_the_link_compresses_for_the_prompt_and_cites_the_chunk(kb: KnowledgeBase) -> None:
    retriever, store = build_narrative_retriever(kb.path, postprocessor="mmr,compress")
    with store:
        found = retriever.retrieve("wind turbines batteries")
    energy = next(s for s in found if s["doc_id"] == "energy")
    assert energy["text"] == LONG and energy["prompt_text"] != LONG
    context = format_context(found)
    assert energy["prompt_text"] in context and LONG not in context
