"""Shared benchmark helpers: dataset location, timing, metrics, result files."""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any, TypeVar

from ragspine.eval.beir import BeirDataset, load_beir

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


def load_dataset(name: str) -> BeirDataset | None:
    """The shared dataset ``name``, or None after saying it is absent (benchmarks then
    measure nothing and exit cleanly)."""
    if not (DATASETS / name).is_dir():
        print(f"no dataset {name} under {DATASETS}; nothing to measure", file=sys.stderr)
        return None
    return load_beir(DATASETS / name)
