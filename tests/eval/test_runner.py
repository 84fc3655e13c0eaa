from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ragspine.cli import main
from ragspine.eval.runner import fold_to_documents, run_eval

KEYS = {"dataset", "mode", "docs", "queries", "ndcg@10", "recall@100", "mrr@10", "map@100",
        "latency_ms", "qps", "index_s"}  # fmt: skip


def test_r93_fold_ranks_documents_by_their_best_chunk() -> None:
    documents = ["a", "a", "b", "c"]  # chunk position -> its document
    assert fold_to_documents([1, 2, 0, 3], documents, 10) == ["a", "b", "c"]
    assert fold_to_documents([3, 1, 2, 0], documents, 2) == ["c", "a"]
    assert fold_to_documents([], documents, 2) == []


def test_r93_run_eval_reports_documented_keys_and_reuses_its_cache(
    dataset: Path, tmp_path: Path
) -> None:
    first, _ = run_eval(dataset, modes=["bm25", "lexical"], cache_dir=tmp_path / "cache")
    assert [r["mode"] for r in first] == ["bm25", "lexical"]
    for row in first:
        assert set(row) >= KEYS
        assert row["docs"] == 5 and row["queries"] == 3
        assert set(row["latency_ms"]) == {"p50", "p95"}
    assert first[0]["ndcg@10"] > 0.9 and first[0]["cached"] is False
    again, _ = run_eval(dataset, modes=["bm25"], cache_dir=tmp_path / "cache")
    assert again[0]["cached"] is True
    assert again[0]["ndcg@10"] == first[0]["ndcg@10"]
    assert len(list((tmp_path / "cache").iterdir())) == 1


def test_r93_cache_key_follows_settings(
    dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_eval(dataset, cache_dir=tmp_path / "cache")
    monkeypatch.setenv("RAGSPINE_STEMMER", "none")
    rows, _ = run_eval(dataset, cache_dir=tmp_path / "cache")
    assert rows[0]["cached"] is False
    assert len(list((tmp_path / "cache").iterdir())) == 2


def test_r93_compare_peers_adds_ratios_on_the_same_chunks(dataset: Path, tmp_path: Path) -> None:
    rows, _ = run_eval(dataset, modes=["bm25"], cache_dir=tmp_path, compare_peers=True)
    assert [r["mode"] for r in rows] == ["bm25", "bm25s", "rank-bm25"]
    assert rows[1]["ndcg@10"] == pytest.approx(rows[0]["ndcg@10"])
    for peer in rows[1:]:
        assert set(peer) >= KEYS
        assert set(peer["ragspine_speedup"]) == {"qps", "latency_p50", "index"}
    assert rows[0]["index_rebuild_s"] > 0


def test_r93_limit_queries(dataset: Path, tmp_path: Path) -> None:
    rows, _ = run_eval(dataset, cache_dir=tmp_path, limit_queries=1)
    assert rows[0]["queries"] == 1


def test_r93_cli_json_one_object_per_mode_and_a_plot(
    dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plot = tmp_path / "eval.png"
    code = main(["eval", str(dataset), "--mode", "bm25", "--mode", "economy", "--json",
                 "--cache", str(tmp_path / "c"), "--plot", str(plot)])  # fmt: skip
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["mode"] for line in lines] == ["bm25", "economy"]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_r6_cli_reports_dataset_errors_with_exit_2(dataset: Path, tmp_path: Path) -> None:
    (dataset / "corpus.jsonl").write_text("{oops\n", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "ragspine.cli", "eval", str(dataset), "--cache", str(tmp_path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "corpus.jsonl:1: malformed JSON" in proc.stderr and proc.stdout == ""


def test_r93_human_output_is_a_table(
    dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval", str(dataset), "--cache", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("| dataset | mode | ndcg@10 |") and "| tiny | auto |" in out


def test_r93_eval_runs_dense_modes_side_by_side(dataset: Path, tmp_path: Path) -> None:
    rows, _ = run_eval(
        dataset, modes=["bm25", "vector", "hybrid"], cache_dir=tmp_path, embedding="deterministic"
    )
    assert [r["mode"] for r in rows] == ["bm25", "vector", "hybrid"]
    assert all(r["embedding"] == "ragspine/hashing-256" for r in rows)
    assert rows[2]["ndcg@10"] > 0.5


def test_r93_available_modes_follow_the_embedding() -> None:
    from ragspine.eval.runner import available_modes

    assert available_modes() == ["bm25"]
    assert available_modes("deterministic") == ["bm25", "vector", "hybrid"]


def test_r93_eval_rerank_adds_a_reranked_row_per_mode(
    dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval", str(dataset), "--mode", "bm25", "--rerank", "embedding:deterministic",
                 "--cache", str(tmp_path / "c"), "--json"]) == 0  # fmt: skip
    base, reranked = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert base["mode"] == reranked["mode"] == "bm25" and "rerank" not in base
    assert reranked["rerank"] == "embedding:deterministic" and reranked["rerank_depth"] == 30
    assert reranked["degraded_queries"] == 0 and reranked["rerank_added_ms"]["p50"] != 0
    assert set(reranked) >= KEYS
    assert main(["eval", str(dataset), "--mode", "bm25", "--rerank", "embedding:deterministic",
                 "--cache", str(tmp_path / "c")]) == 0  # fmt: skip
    assert "| bm25 + embedding:deterministic |" in capsys.readouterr().out
