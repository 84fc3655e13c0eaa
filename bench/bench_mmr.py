"""MMR post-processing (R60): redundancy of the top-10 and nDCG@10, with and without, same run.

Run: ``python bench/bench_mmr.py [--dataset scifact] [--queries 300] [--lambda 0.7]``. The
knowledge base is the dataset's default one (eval cache). Plain: ``kb.search(top_k=10)``. MMR:
the first 30 results, MMR picks 10 (as the link does with ``postprocessor="mmr"``). Redundancy
is the mean pairwise cosine of the ten snippets (the knowledge base's own model); nDCG@10 ranks
documents by their first snippet. Prints a table and writes ``bench/results/<date>-mmr.json``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import load_dataset, print_table, write_result

from ragspine.config import default_eval_cache
from ragspine.eval.metrics import mean_metrics, per_query_metrics
from ragspine.eval.runner import open_eval_kb
from ragspine.retrieval.hybrid import RERANK_DEPTH
from ragspine.retrieval.link.snippet import Snippet
from ragspine.retrieval.postprocess import MMR
from ragspine.retrieval.vector.embedding_backends import EmbeddingBackend, embed_matrix


def redundancy(backend: EmbeddingBackend, snippets: list[Snippet]) -> float:
    if len(snippets) < 2:
        return 0.0
    vectors = embed_matrix(backend, [s.text for s in snippets], kind="passage")
    similarity = vectors @ vectors.T
    upper = similarity[np.triu_indices(len(snippets), k=1)]
    return float(upper.mean())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="scifact")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--lambda", dest="lambda_", type=float, default=0.7)
    parser.add_argument("--cache", type=Path, default=Path(default_eval_cache()))
    args = parser.parse_args()
    data = load_dataset(args.dataset)
    if data is None:
        return 0
    queries = dict(list(data.judged_queries().items())[: args.queries])
    ekb = open_eval_kb(data, args.cache, None, "auto")
    backend = ekb.kb.embedding
    if backend is None:
        print("the knowledge base has no embedding model; MMR needs one", file=sys.stderr)
        return 0
    mmr = MMR(backend, lambda_=args.lambda_)
    runs: dict[str, dict[str, list[str]]] = {"plain": {}, "mmr": {}}
    spread: dict[str, list[float]] = {"plain": [], "mmr": []}
    try:
        for query_id, text in queries.items():
            pool = list(ekb.kb.search(text, top_k=RERANK_DEPTH))
            for name, chosen in (("plain", pool[:10]), ("mmr", mmr.process(text, pool, 10))):
                runs[name][query_id] = list(dict.fromkeys(s.doc_id for s in chosen))
                spread[name].append(redundancy(backend, chosen))
    finally:
        ekb.kb.close()
    qrels = {q: data.qrels[q] for q in queries}
    results = {
        name: {**mean_metrics(per_query_metrics(qrels, run)),
               "redundancy": float(np.mean(spread[name]))}
        for name, run in runs.items()
    }  # fmt: skip
    print_table(
        f"MMR (λ = {args.lambda_}) on {args.dataset}, {len(queries)} queries, top-10 of 30",
        ["variant", "mean pairwise cosine (top-10)", "nDCG@10", "distinct documents"],
        [[name, r["redundancy"], r["ndcg@10"],
          float(np.mean([len(v) for v in runs[name].values()]))]
         for name, r in results.items()],
    )  # fmt: skip
    print(f"\nwritten: {write_result('mmr', {'lambda': args.lambda_, 'results': results})}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
