"""Shared benchmark helpers: dataset location, timing, metrics, result files."""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parent.parent
DATASETS = Path(os.environ.get("RAGSPINE_DATASETS", REPO.parent / "shared" / "datasets"))
RESULTS = REPO / "bench" / "results"

T = TypeVar("T")


def timed(fn: Callable[[], T], repeat: int = 1) -> tuple[T, float]:
    """Run ``fn`` ``repeat`` times; returns the last result and the median seconds."""
    times = []
    result: T
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return result, statistics.median(times)


def evaluate(
    qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]
) -> dict[str, float]:
    """nDCG@10 and Recall@100 with trec_eval semantics (pytrec_eval), averaged over queries."""
    import pytrec_eval

    judged = {q: {d: int(g) for d, g in docs.items()} for q, docs in qrels.items() if q in run}
    evaluator = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut.10", "recall.100"})
    per_query = evaluator.evaluate({q: run[q] for q in judged})
    n = len(per_query)
    return {
        "ndcg@10": sum(m["ndcg_cut_10"] for m in per_query.values()) / n,
        "recall@100": sum(m["recall_100"] for m in per_query.values()) / n,
    }


def rank_scores(ids: list[str]) -> dict[str, float]:
    """A ranked id list as trec scores that keep its order exactly (no tie re-sorting)."""
    return {doc: float(len(ids) - i) for i, doc in enumerate(ids)}


def write_result(name: str, payload: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{date.today().isoformat()}-{name}.json"
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def print_table(title: str, header: list[str], rows: list[list[Any]]) -> None:
    print(f"\n## {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        cells = [f"{c:.4f}" if isinstance(c, float) else str(c) for c in row]
        print("| " + " | ".join(cells) + " |")
