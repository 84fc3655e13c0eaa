"""Showing evaluation results: a table for people, JSON lines for scripts, a PNG plot."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ragspine.eval.metrics import METRICS

JSON_KEYS = (
    "dataset", "mode", "docs", "queries", *METRICS, "latency_ms", "qps", "index_s",
)  # fmt: skip


def json_lines(results: Sequence[dict[str, Any]]) -> str:
    """One JSON object per mode, one per line."""
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=False) + "\n" for r in results)


def run_label(result: dict[str, Any]) -> str:
    """A row's mode, with the reranker that ran after it."""
    return str(result["mode"]) + (f" + {result['rerank']}" if result.get("rerank") else "")


def markdown_table(results: Sequence[dict[str, Any]]) -> str:
    header = [
        "dataset",
        "mode",
        *METRICS,
        "p50 ms",
        "p95 ms",
        "q/s",
        "index s",
        "ragspine speed-up",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in results:
        speedup = r.get("ragspine_speedup") or {}
        ratio = ", ".join(
            f"{speedup[key]:.2f}x {label}"
            for key, label in (("qps", "q/s"), ("index", "index build"))
            if speedup.get(key)
        )
        cells = [
            r["dataset"],
            run_label(r),
            *(f"{r[m]:.4f}" for m in METRICS),
            f"{r['latency_ms']['p50']:.2f}",
            f"{r['latency_ms']['p95']:.2f}",
            f"{r['qps']:.0f}",
            f"{r['index_s']:.2f}",
            ratio,
        ]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def write_plot(results: Sequence[dict[str, Any]], path: str | Path) -> None:
    """nDCG@10 and Recall@100 per mode, and latency per mode, side by side."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("plots need matplotlib: pip install 'ragspine[eval]'") from exc
    labels = [f"{r['dataset']}\n{run_label(r)}" for r in results]
    positions = list(range(len(results)))
    fig, (quality, speed) = plt.subplots(1, 2, figsize=(max(8, 1.6 * len(results) + 4), 4.5))
    width = 0.38
    quality.bar([p - width / 2 for p in positions], [r["ndcg@10"] for r in results], width,
                label="nDCG@10")  # fmt: skip
    quality.bar([p + width / 2 for p in positions], [r["recall@100"] for r in results], width,
                label="Recall@100")  # fmt: skip
    quality.set_xticks(positions, labels, fontsize=8)
    quality.set_ylim(0, 1)
    quality.set_title("Retrieval quality")
    quality.legend(loc="lower right", framealpha=0.9)
    speed.bar(positions, [r["latency_ms"]["p50"] for r in results], width, label="p50")
    speed.scatter(positions, [r["latency_ms"]["p95"] for r in results], color="black", label="p95",
                  zorder=3)  # fmt: skip
    speed.set_xticks(positions, labels, fontsize=8)
    speed.set_ylabel("ms per query")
    speed.set_title("Latency")
    speed.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
