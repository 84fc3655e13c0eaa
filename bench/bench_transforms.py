"""Query transforms against a real chat model (R41–R44): quality and latency next to the plain
query, in the same run.

Run: ``RAGSPINE_LLM_BASE_URL=http://host:8000/v1 RAGSPINE_LLM_MODEL=qwen2.5-7b \\
python bench/bench_transforms.py [--dataset scifact] [--queries 50]``. Without
``RAGSPINE_LLM_BASE_URL`` it says so and measures nothing (no model here is reachable offline).
Each variant runs the same queries through ``make_query_pipeline`` on the dataset's default
knowledge base (from the eval cache); documents are ranked by their best chunk. Prints a table
and writes ``bench/results/<date>-transforms.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import load_dataset, print_table, write_result

from ragspine.config import default_eval_cache, llm_settings
from ragspine.eval.metrics import mean_metrics, per_query_metrics
from ragspine.eval.runner import open_eval_kb
from ragspine.retrieval.query import make_query_pipeline

VARIANTS: dict[str, dict[str, Any]] = {
    "plain": {},
    "multi_query": {"transform": "multi_query"},
    "rag_fusion": {"transform": "rag_fusion"},
    "hyde": {"transform": "hyde"},
    "step_back": {"transform": "step_back"},
    "decompose": {"decompose": True},
    "adaptive (heuristic)": {"adaptive": "heuristic", "decompose": True},
    "corrective": {"corrective": True},
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="scifact")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--top-k", type=int, default=100)
    parser.add_argument("--cache", type=Path, default=Path(default_eval_cache()))
    args = parser.parse_args()
    if not llm_settings().get("base_url"):
        print("set RAGSPINE_LLM_BASE_URL (and RAGSPINE_LLM_MODEL) to measure the query "
              "transforms against a chat model; nothing measured", file=sys.stderr)  # fmt: skip
        return 0
    data = load_dataset(args.dataset)
    if data is None:
        return 0
    queries = dict(list(data.judged_queries().items())[: args.queries])
    qrels = {q: data.qrels[q] for q in queries}
    ekb = open_eval_kb(data, args.cache, None, "auto")
    rows, runs = [], {}
    try:
        for name, options in VARIANTS.items():
            pipeline = make_query_pipeline(ekb.kb, **options) if options else None
            run: dict[str, list[str]] = {}
            latencies, degraded = [], 0
            for query_id, text in queries.items():
                start = time.perf_counter()
                found = (pipeline or ekb.kb).search(text, top_k=args.top_k)
                latencies.append(time.perf_counter() - start)
                run[query_id] = list(dict.fromkeys(s.doc_id for s in found))
                degraded += found.degraded
            if pipeline is not None:
                pipeline.close()
            metrics = mean_metrics(per_query_metrics(qrels, run))
            runs[name] = {**metrics, "p50_ms": 1000 * float(np.median(latencies)),
                          "degraded_queries": degraded}  # fmt: skip
            rows.append([name, metrics["ndcg@10"], metrics["recall@100"],
                         runs[name]["p50_ms"], degraded])  # fmt: skip
    finally:
        ekb.kb.close()
    print_table(
        f"Query transforms on {args.dataset} ({len(queries)} queries, model "
        f"{llm_settings().get('model', '?')})",
        ["variant", "nDCG@10", "R@100", "p50 ms", "degraded queries"],
        rows,
    )
    print(f"\nwritten: {write_result('transforms', {'dataset': args.dataset, 'runs': runs})}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
