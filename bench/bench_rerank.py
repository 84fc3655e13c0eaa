"""Rerankers against the hybrid default: quality gained and latency added, per offline option.

Run: ``python bench/bench_rerank.py [--rerank SPEC ...] [--datasets ...] [--limit-queries N]``.
Each dataset's knowledge base is the one ``ragspine eval --embedding auto`` builds (the default),
from the eval cache. Every option runs through ``ragspine eval --rerank`` (``run_eval``): the
default first, then the same queries reranked; the first 30 results are reranked
(``RERANK_DEPTH``). Prints a table and writes ``bench/results/<date>-rerank.json``.

A second table measures failing models: a chat model that hangs, answers HTTP 500, answers
garbage, or is not there, behind ``llm_score`` with a 1 s timeout: the latency each adds to a
query (at most the timeout) and whether the result equals the un-reranked order (it must).

Offline options measured by default: ``embedding:e5`` and ``embedding:minilm`` (bundled
bi-encoders), and ``cross_encoder`` when ``RAGSPINE_CROSS_ENCODER_DIR`` points at a model (none
ships in a package). LLM and HTTP rerankers need a server: pass their spec with
``RAGSPINE_LLM_BASE_URL`` / ``RAGSPINE_RERANK_BASE_URL`` set to measure them the same way.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from common import DATASETS, print_table, write_result

from ragspine.config import default_eval_cache
from ragspine.eval.beir import load_beir
from ragspine.eval.runner import open_eval_kb, run_eval
from ragspine.llm import OpenAIChatProvider
from ragspine.retrieval.rerank.cross_encoder import make_reranker
from tests.openai_server import openai_server

JUDGE_TIMEOUT_S = 1.0
FAILURES = ("hangs", "HTTP 500", "garbage", "not there")

DEFAULT_DATASETS = ["scifact", "cranfield", "cisi", "xquad-zh-en"]


def offline_options() -> list[str]:
    options = ["embedding:e5", "embedding:minilm"]
    if os.environ.get("RAGSPINE_CROSS_ENCODER_DIR"):
        options.insert(0, "cross_encoder")
    return options


@contextmanager
def failing_model(failure: str) -> Iterator[str]:
    """The base URL of a chat model that fails in the named way."""
    if failure == "not there":
        yield "http://127.0.0.1:9/v1"
        return
    replies = {"HTTP 500": (500, "boom"), "garbage": (200, {"choices": [{"message": {
        "role": "assistant", "content": "I would rather not grade these."}}]})}  # fmt: skip

    def handle(*_: Any) -> tuple[int, Any]:
        if failure == "hangs":
            time.sleep(3 * JUDGE_TIMEOUT_S)
        return replies.get(failure, (200, {}))

    with openai_server(handle) as (url, _):
        yield url


def measure_failures(dataset: Path, cache: Path, queries: int) -> list[dict[str, Any]]:
    """Latency a failing judge adds (per query, paired with the same query un-reranked) and
    whether the order is the un-reranked one."""
    data = load_beir(dataset)
    texts = list(data.judged_queries().values())[:queries]
    ekb = open_eval_kb(data, cache, None, "auto")
    out = []
    try:
        for failure in FAILURES:
            with failing_model(failure) as url:
                provider = OpenAIChatProvider(url, "judge", timeout=JUDGE_TIMEOUT_S)
                chain = make_reranker("llm_score", provider=provider)
                added, same, degraded = [], 0, 0
                for text in texts:
                    start = time.perf_counter()
                    plain = ekb.kb.search(text, top_k=10)
                    middle = time.perf_counter()
                    judged = ekb.kb.search(text, top_k=10, rerank=chain)
                    end = time.perf_counter()
                    added.append((end - middle) - (middle - start))
                    same += [s.chunk_id for s in plain] == [s.chunk_id for s in judged]
                    degraded += judged.degraded
            out.append({
                "failure": failure, "timeout_s": JUDGE_TIMEOUT_S, "queries": len(texts),
                "added_ms": {"p50": 1000 * float(np.median(added)),
                             "max": 1000 * float(np.max(added))},
                "same_order": same, "degraded": degraded,
            })  # fmt: skip
    finally:
        ekb.kb.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rerank", nargs="*", default=None, help="specs (default: offline)")
    parser.add_argument("--datasets", nargs="*", default=DEFAULT_DATASETS)
    parser.add_argument("--limit-queries", type=int, default=300)
    parser.add_argument("--cache", type=Path, default=Path(default_eval_cache()))
    parser.add_argument("--failures-only", action="store_true", help="only the failing models")
    parser.add_argument("--failure-queries", type=int, default=20)
    args = parser.parse_args()
    if not DATASETS.is_dir():
        print(f"no datasets at {DATASETS}; nothing to measure", file=sys.stderr)
        return 0
    options = args.rerank or offline_options()
    rows: list[list[Any]] = []
    runs: list[dict[str, Any]] = []
    for name in [] if args.failures_only else args.datasets:
        for spec in options:
            print(f"{name} + {spec} ...", file=sys.stderr, flush=True)
            results, _ = run_eval(
                DATASETS / name, modes=["auto"], limit_queries=args.limit_queries,
                cache_dir=args.cache, embedding="auto", rerank=spec,
            )  # fmt: skip
            base, reranked = results
            runs.append({"dataset": name, "rerank": spec, "base": base, "reranked": reranked})
            rows.append(
                [name, base["embedding"], spec, base["queries"], base["ndcg@10"],
                 reranked["ndcg@10"], reranked["ndcg@10"] - base["ndcg@10"],
                 base["recall@100"], reranked["recall@100"], base["latency_ms"]["p50"],
                 reranked["rerank_added_ms"]["p50"], reranked["degraded_queries"]]
            )  # fmt: skip
    header = ["dataset", "retrieval model", "reranker", "queries", "nDCG@10 default",
              "nDCG@10 reranked", "Δ nDCG@10", "R@100 default", "R@100 reranked",
              "p50 ms default", "added p50 ms (top-30)", "degraded queries"]  # fmt: skip
    print_table("Rerankers vs the hybrid default", header, rows)
    failures = measure_failures(DATASETS / args.datasets[0], args.cache, args.failure_queries)
    print_table(
        f"A failing judge ({args.datasets[0]}, llm_score, timeout {JUDGE_TIMEOUT_S:g} s)",
        ["failure", "queries", "added p50 ms", "added max ms", "same order as un-reranked",
         "marked degraded"],
        [[f["failure"], f["queries"], f["added_ms"]["p50"], f["added_ms"]["max"],
          f["same_order"], f["degraded"]] for f in failures],
    )  # fmt: skip
    name = "rerank-failures" if args.failures_only else "rerank"
    path = write_result(
        name, {"limit_queries": args.limit_queries, "runs": runs, "failing_judge": failures}
    )
    print(f"\nwritten: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
