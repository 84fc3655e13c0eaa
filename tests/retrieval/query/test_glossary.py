"""Glossary rewriting (R40) and the safety gate (R45): deterministic, original first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragspine.errors import InvalidArgumentError
from ragspine.retrieval.lexical.retrieval import GlossaryQueryRewriter
from ragspine.retrieval.query import SafetyGate, load_deny_list, load_glossary

GLOSSARY = """
entities:
  - {name: ACME, aliases: [Acme Corp, 艾克米]}
metrics:
  - {name: revenue, synonyms: [sales, turnover]}
pairs:
  - [营收, revenue]
"""


@pytest.fixture()
def rewriter(tmp_path: Path) -> GlossaryQueryRewriter:
    (tmp_path / "glossary.yaml").write_text(GLOSSARY, encoding="utf-8")
    return GlossaryQueryRewriter(load_glossary(tmp_path / "glossary.yaml"), max_queries=5)


def test_r40_original_first_then_one_rewrite_per_alternative(
    rewriter: GlossaryQueryRewriter,
) -> None:
    assert rewriter.rewrite("Why did ACME revenue fall?") == [
        "Why did ACME revenue fall?",
        "Why did Acme Corp revenue fall?",
        "Why did 艾克米 revenue fall?",
        "Why did ACME sales fall?",
        "Why did ACME turnover fall?",
    ]
    assert rewriter.rewrite("艾克米营收") == [
        "艾克米营收",
        "ACME营收",
        "Acme Corp营收",
        "艾克米revenue",
    ]
    assert rewriter.rewrite("no glossary terms here") == ["no glossary terms here"]


def test_r40_whole_words_only_and_deterministic(rewriter: GlossaryQueryRewriter) -> None:
    assert rewriter.rewrite("acmeish revenues") == ["acmeish revenues"]
    assert rewriter.rewrite("acme sales") == rewriter.rewrite("acme sales")
    assert len(GlossaryQueryRewriter(rewriter.glossary, max_queries=2).rewrite("acme sales")) == 2


def test_r40_json_glossaries_and_bad_files(tmp_path: Path) -> None:
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"pairs": [["car", "automobile"]]}), encoding="utf-8")
    assert GlossaryQueryRewriter(load_glossary(path)).rewrite("car") == ["car", "automobile"]
    for bad in ('{"pairs": [["lonely"]]}', '{"colours": []}', "[1, 2]", "{not json"):
        path.write_text(bad, encoding="utf-8")
        with pytest.raises(InvalidArgumentError, match=r"g\.json"):
            load_glossary(path)
    with pytest.raises(InvalidArgumentError):
        load_glossary(tmp_path / "missing.yaml")


def test_r45_the_gate_rejects_denied_entities_terms_and_patterns(tmp_path: Path) -> None:
    path = tmp_path / "deny.yaml"
    path.write_text("entities: [Globex]\nterms: [project aurora, 竞争对手]\n"
                    "patterns: ['\\bQ[1-4]-internal\\b']\n", encoding="utf-8")  # fmt: skip
    gate = load_deny_list(path)
    verdict = gate.check(["globex revenue", "our revenue", "Project Aurora budget",
                          "竞争对手的价格", "Q3-internal numbers", "globexian trade"])  # fmt: skip
    assert verdict.allowed == ("our revenue", "globexian trade")
    assert verdict.rejected == ("globex revenue", "Project Aurora budget", "竞争对手的价格",
                                "Q3-internal numbers")  # fmt: skip
    assert SafetyGate().check(["anything"]).allowed == ("anything",)
    with pytest.raises(InvalidArgumentError, match="pattern"):
        SafetyGate(patterns=["(unclosed"])
