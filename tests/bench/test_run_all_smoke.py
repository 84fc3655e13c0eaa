"""CI runs a smoke of the benchmark suite (R93): one small dataset, 50 queries, peers included."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DATASETS, REPO


@pytest.mark.slow
@pytest.mark.skipif(not (DATASETS / "cisi").is_dir(), reason="shared datasets absent")
def test_r93_benchmark_suite_smoke(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "run_all.py"), "--smoke", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (result,) = tmp_path.glob("*-cisi.json")
    rows = json.loads(result.read_text(encoding="utf-8"))
    assert [r["mode"] for r in rows] == ["bm25", "bm25s", "rank-bm25"]
    assert all(r["queries"] == 50 for r in rows)
    assert rows[0]["ndcg@10"] > 0.2
    assert "| cisi | bm25 |" in (tmp_path / "SUMMARY.md").read_text(encoding="utf-8")
