"""Fusion ablation: what each rule of the default hybrid fusion adds, on every shared dataset.

Run: ``python bench/bench_fusion.py [--cache DIR] [--datasets ...]``. Prints a table of nDCG@10
and writes ``bench/results/<date>-fusion.json``. Each dataset's knowledge base is the one
``ragspine eval --embedding auto`` builds (the zero-configuration default: MiniLM for English,
e5 for text with CJK), shared through the eval cache; only the fusion changes between columns:

- ``rrf``: Reciprocal Rank Fusion (k = 60), chunk by chunk, no abstention;
- ``convex``: min-max normalised scores averaged, chunk by chunk, no abstention;
- ``+ documents``: convex, each channel's best chunk per document fused;
- ``+ abstention`` (the default): also, BM25 abstains on chunks in another script than the query.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATASETS, print_table, write_result

from ragspine.config import default_eval_cache
from ragspine.eval.beir import load_beir
from ragspine.eval.metrics import mean_metrics, per_query_metrics
from ragspine.eval.runner import open_eval_kb
from ragspine.retrieval.hybrid import HybridRetriever

VARIANTS: dict[str, dict[str, Any]] = {
    "rrf": {"fusion": "rrf", "document_fusion": False, "script_abstention": False},
    "convex": {"fusion": "convex", "document_fusion": False, "script_abstention": False},
    "+ documents": {"fusion": "convex", "document_fusion": True, "script_abstention": False},
    "+ abstention": {"fusion": "convex", "document_fusion": True, "script_abstention": True},
}


def ablate(path: Path, cache: Path) -> dict[str, Any]:
    dataset = load_beir(path)
    queries = dataset.judged_queries()
    ekb = open_eval_kb(dataset, cache, embedding="auto")
    kb = ekb.kb
    out: dict[str, Any] = {"dataset": path.name, "embedding": kb.embedding.model_id}
    try:
        for mode in ("bm25", "vector"):
            run = {q: kb.retrieve(t, top_k=100, mode=mode, per_document=True).doc_ids or []
                   for q, t in queries.items()}  # fmt: skip
            out[mode] = mean_metrics(per_query_metrics(dataset.qrels, run))["ndcg@10"]
        for name, options in VARIANTS.items():
            kb._retriever = HybridRetriever(kb._index, kb._vectors, **options)
            run = {q: kb.retrieve(t, top_k=100, mode="hybrid", per_document=True).doc_ids or []
                   for q, t in queries.items()}  # fmt: skip
            out[name] = mean_metrics(per_query_metrics(dataset.qrels, run))["ndcg@10"]
            kb._retriever.close()
    finally:
        kb.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path(default_eval_cache()))
    parser.add_argument("--datasets", nargs="*", default=None)
    args = parser.parse_args()
    if not DATASETS.is_dir():
        print(f"no datasets at {DATASETS}; nothing to measure", file=sys.stderr)
        return 0
    paths = sorted(p for p in DATASETS.iterdir() if (p / "queries.jsonl").is_file())
    rows = [ablate(p, args.cache) for p in paths if not args.datasets or p.name in args.datasets]
    columns = ["bm25", "vector", *VARIANTS]
    print_table(
        "Hybrid fusion ablation, nDCG@10 (per-document rankings, top 100)",
        ["dataset", "model", *columns],
        [[r["dataset"], r["embedding"].split("/")[-1], *(r[c] for c in columns)] for r in rows],
    )
    print(f"\nwrote {write_result('fusion', {'variants': VARIANTS, 'results': rows})}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
