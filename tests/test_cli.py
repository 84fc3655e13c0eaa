from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ragspine import Document, KnowledgeBase
from ragspine.cli import main
from tests.conftest import EXAMPLES

SNIPPET_KEYS = {
    "text",
    "doc_id",
    "chunk_id",
    "title",
    "source_locator",
    "sensitivity",
    "metadata",
    "scores",
}


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ragspine.cli", *args], capture_output=True, text=True, check=False
    )


@pytest.fixture(scope="module")
def kb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "kb"
    assert main(["ingest", str(EXAMPLES), "--kb", str(path), "--exclude", "_drafts/**",
                 "--meta", "collection=demo", "--embedding", "none", "--json"]) == 0  # fmt: skip
    return path


def test_r90_ingest_json_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ingest", str(EXAMPLES / "zh"), "--kb", str(tmp_path / "kb"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["added"] == 30 and summary["failed"] == [] and summary["chunks"] > 30


def test_r90_search_json_has_the_documented_keys(
    kb_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert (
        main(["search", "广茂铁路全长多少公里", "--kb", str(kb_dir), "--top-k", "3", "--json"]) == 0
    )
    results = json.loads(capsys.readouterr().out)
    assert len(results) == 3
    for result in results:
        assert set(result) >= SNIPPET_KEYS
        assert (
            set(result["scores"]) == {"bm25", "vector", "fused"}
            and result["scores"]["vector"] is None
        )
        assert result["metadata"]["collection"] == "demo"
    assert results[0]["doc_id"] == "corpus/zh/cmrc-dev-2.md"


def test_r27_cli_filters_and_doc_scope(kb_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    main(["search", "铁路", "--kb", str(kb_dir), "--filter", "entity=莱索托", "--json"])
    assert {r["doc_id"] for r in json.loads(capsys.readouterr().out)} == {
        "corpus/zh/cmrc-dev-14.txt"
    }
    main(["search", "铁路", "--kb", str(kb_dir), "--filter", "period:in:2017,2018",
          "--filter", "topic:ne:football", "--json"])  # fmt: skip
    periods = {r["metadata"]["period"] for r in json.loads(capsys.readouterr().out)}
    assert periods == {"2018"}
    main(["search", "铁路", "--kb", str(kb_dir), "--doc-id", "corpus/zh/cmrc-dev-2.md", "--json"])
    assert {r["doc_id"] for r in json.loads(capsys.readouterr().out)} == {"corpus/zh/cmrc-dev-2.md"}


@pytest.mark.parametrize(
    "bad", ["year:like:3", "year:between:3,1", "year", "bad field=1", "year:in:"]
)
def test_r4_bad_filter_exits_2_and_prints_no_results(kb_dir: Path, bad: str) -> None:
    proc = run_cli("search", "铁路", "--kb", str(kb_dir), "--filter", bad, "--json")
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and "filter" in proc.stderr


def test_r6_bad_arguments_exit_2(kb_dir: Path, tmp_path: Path) -> None:
    assert run_cli("search", "x", "--kb", str(kb_dir), "--top-k", "-1").returncode == 2
    assert run_cli("search", "x", "--kb", str(kb_dir), "--mode", "weird").returncode == 2
    missing = run_cli("search", "x", "--kb", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "not a knowledge base" in missing.stderr
    assert not (tmp_path / "nope").exists()


def test_r3_search_json_is_byte_identical_across_processes(kb_dir: Path) -> None:
    args = ("search", "white matter development in preterm infants", "--kb", str(kb_dir),
            "--top-k", "20", "--json")  # fmt: skip
    first, second = run_cli(*args), run_cli(*args)
    assert first.returncode == 0 and first.stdout and first.stdout == second.stdout


def test_r14_ingest_with_a_corrupt_file_exits_1_with_a_summary(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "ok.md").write_text("# Fine\n\nA readable note about kites.", encoding="utf-8")
    (src / "broken.docx").write_bytes(b"PK\x03\x04 not really a zip")
    proc = run_cli("ingest", str(src), "--kb", str(tmp_path / "kb"))
    assert proc.returncode == 1
    assert "1 added" in proc.stdout and "1 failed" in proc.stdout
    assert "broken.docx" in proc.stderr
    search = run_cli("search", "kites", "--kb", str(tmp_path / "kb"), "--json")
    assert [r["doc_id"] for r in json.loads(search.stdout)] == ["src/ok.md"]


def test_r90_human_output_shows_citations(kb_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    main(["search", "HTRF high throughput screening", "--kb", str(kb_dir), "--top-k", "2"])
    out = capsys.readouterr().out
    assert out.startswith("[1] ") and "#chars=" in out and "bm25" in out


def test_r90_kb_commands_and_doctor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "root"
    assert main(["kb", "create", "--kb", str(root / "one")]) == 0
    assert main(["kb", "create", "--kb", str(root / "two")]) == 0
    capsys.readouterr()
    assert main(["kb", "list", "--root", str(root), "--json"]) == 0
    assert [k["name"] for k in json.loads(capsys.readouterr().out)] == ["one", "two"]
    assert main(["kb", "info", "--kb", str(root / "one"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["chunks"] == 0
    assert main(["kb", "delete", "--kb", str(root / "one")]) == 2
    assert main(["kb", "delete", "--kb", str(root / "one"), "--yes"]) == 0
    assert not (root / "one").exists()
    assert main(["kb", "delete", "--kb", str(tmp_path), "--yes"]) == 2  # not a knowledge base
    capsys.readouterr()
    assert main(["doctor", "--json"]) == 0
    doctor = json.loads(capsys.readouterr().out)
    assert doctor["loaders"]["pdf (pypdf)"] is True and doctor["retrieval"]["lexical"]


def test_r26_cli_hybrid_search_with_a_recorded_embedding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kb = str(tmp_path / "kb")
    assert main(["ingest", str(EXAMPLES / "zh"), "--kb", kb, "--embedding", "deterministic"]) == 0
    capsys.readouterr()
    assert main(["search", "广茂铁路", "--kb", kb, "--mode", "hybrid", "--json"]) == 0
    results = json.loads(capsys.readouterr().out)
    assert results and all(r["scores"]["fused"] for r in results)
    assert any(r["scores"]["vector"] is not None for r in results)
    proc = run_cli("search", "铁路", "--kb", str(tmp_path / "kb"), "--mode", "vector", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)  # the model is found from kb.json


def test_r6_search_rerank_degrades_visibly_and_keeps_the_json_list(
    kb_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["search", "railway length", "--kb", str(kb_dir), "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    monkeypatch.setenv("RAGSPINE_RERANK_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("RAGSPINE_RERANK_TIMEOUT", "1")
    query = ["search", "railway length", "--kb", str(kb_dir)]
    assert main([*query, "--rerank", "http", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == plain  # the fused order stands
    assert "ragspine: warning: degraded: http: " in captured.err


def test_r51_search_rerank_shows_the_rerank_score(
    kb_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["search", "railway length", "--kb", str(kb_dir), "--rerank", "embedding:deterministic"]
    assert main([*args, "--json"]) == 0
    results = json.loads(capsys.readouterr().out)
    assert results and all(isinstance(r["scores"]["rerank"], float) for r in results)
    assert main(args) == 0
    assert "rerank " in capsys.readouterr().out
    assert main(["search", "railway length", "--kb", str(kb_dir), "--rerank", "colbert"]) == 2


def test_r40_search_with_a_glossary_and_clear_errors_for_bad_switches(
    kb_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    glossary = tmp_path / "glossary.json"
    glossary.write_text(json.dumps({"pairs": [["railway", "铁路"]]}), encoding="utf-8")
    assert main(["search", "railway length", "--kb", str(kb_dir), "--json",
                 "--glossary", str(glossary)]) == 0  # fmt: skip
    rewritten = json.loads(capsys.readouterr().out)
    assert main(["search", "railway length", "--kb", str(kb_dir), "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    chinese = [r for r in rewritten if r["doc_id"].startswith("corpus/zh/")]
    assert chinese and not any(r["doc_id"].startswith("corpus/zh/") for r in plain)  # via 铁路
    assert main(["search", "x", "--kb", str(kb_dir), "--transform", "hyde"]) == 2  # no model
    assert "RAGSPINE_LLM_BASE_URL" in capsys.readouterr().err
    assert main(["search", "x", "--kb", str(kb_dir), "--glossary", str(tmp_path / "no")]) == 2


def test_r31_cli_searches_several_knowledge_bases(
    kb_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "notes"
    with KnowledgeBase(other) as kb:
        kb.add_documents([Document("n1", "Railway length notes: the line is long.")])
    assert main(["search", "railway length", "--kb", str(kb_dir), "--kb", str(other),
                 "--json"]) == 0  # fmt: skip
    results = json.loads(capsys.readouterr().out)
    assert {r["library_id"] for r in results} == {kb_dir.name, "notes"}
    assert main(["search", "x", "--kb", str(kb_dir), "--kb", str(other), "--doc-id", "a"]) == 2


def test_r60_search_postprocess_compresses_into_prompt_text(
    kb_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["search", "railway length", "--kb", str(kb_dir), "--json"]
    assert main([*args, "--postprocess", "lost_in_middle,compress"]) == 0
    results = json.loads(capsys.readouterr().out)
    assert results and all("prompt_text" in r for r in results)
    assert main([*args, "--postprocess", "shrink"]) == 2
