"""The shipped sample corpus and the demo that the README's first command runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ragspine import KnowledgeBase
from tests.conftest import EXAMPLES, REPO


def test_r14_sample_corpus_has_every_format_and_both_languages() -> None:
    files = [p for p in EXAMPLES.rglob("*") if p.is_file() and not p.name.endswith(".meta.json")]
    suffixes = {p.suffix for p in files}
    assert {".md", ".txt", ".html", ".pdf", ".docx"} <= suffixes
    assert len(files) >= 60
    assert (REPO / "examples" / "ATTRIBUTION.md").is_file()


def test_demo_queries_find_their_documents_first(tmp_path: Path) -> None:
    queries = json.loads((REPO / "examples" / "queries.json").read_text(encoding="utf-8"))
    with KnowledgeBase(tmp_path / "kb") as kb:
        kb.ingest(EXAMPLES, exclude=["_drafts/**"])
        for item in queries:
            top = kb.search(item["query"], top_k=1)[0]
            assert top.source_path.endswith(item["expect_doc_file"]), item["query"]


def test_demo_script_prints_cited_answers(tmp_path: Path) -> None:
    kb = tmp_path / "kb"
    with KnowledgeBase(kb) as knowledge_base:
        knowledge_base.ingest(EXAMPLES, exclude=["_drafts/**"])
    proc = subprocess.run(
        [sys.executable, str(REPO / "examples" / "demo.py"), str(kb)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert proc.stdout.count("cite: ") >= 18
    assert "Q: 广茂铁路全长多少公里" in proc.stdout
    owner, _, context = proc.stdout.partition("Context for an LLM prompt")
    assert "[RESTRICTED]" in owner.split("Q: DNA methylation")[-1]  # the owner sees it, flagged
    assert "[1] " in context and "dna-methylome" not in context  # R1: never in a prompt


def test_demo_script_prints_every_channels_score_in_a_hybrid_knowledge_base(
    tmp_path: Path,
) -> None:
    kb = tmp_path / "kb"
    with KnowledgeBase(kb, embedding="deterministic") as knowledge_base:
        knowledge_base.ingest(EXAMPLES / "zh", exclude=["_drafts/**"])
    proc = subprocess.run(
        [sys.executable, str(REPO / "examples" / "demo.py"), str(kb)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "vector=" in proc.stdout and "fused=" in proc.stdout
