"""Glossary rewriting (R40) on real collections, with a glossary built from the data itself.

Run: ``python bench/bench_glossary.py [--datasets scifact cranfield] [--min-count 2]``.

The glossary is mined from each corpus, not written for its queries: every abbreviation defined
in the text as ``long form (ABBR)`` whose letters are the initials of the words before it (the
Schwartz–Hearst rule, simplified), seen at least ``--min-count`` times, becomes a pair
``[ABBR, long form]``. Each query then runs as the original plus its glossary rewrites
(``GlossaryQueryRewriter``, at most 5), document rankings fused by RRF — what ``--glossary`` does
— against the original alone, in the same run, on the default knowledge base and on BM25 alone.
Prints nDCG@10 / Recall@100 and writes ``bench/results/<date>-glossary.json``.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATASETS, print_table, write_result

from ragspine.config import default_eval_cache
from ragspine.eval.beir import load_beir
from ragspine.eval.metrics import mean_metrics, per_query_metrics
from ragspine.eval.runner import open_eval_kb
from ragspine.retrieval.lexical.fusion import rrf_fuse
from ragspine.retrieval.query.glossary import Glossary, GlossaryQueryRewriter

_DEFINITION = re.compile(r"((?:[A-Za-z][\w-]*\s+){1,8})\(([A-Z][A-Za-z0-9-]{1,9}s?)\)")


def mine_abbreviations(texts: list[str], min_count: int) -> Glossary:
    """``[ABBR, long form]`` pairs defined in ``texts`` at least ``min_count`` times."""
    found: Counter[tuple[str, str]] = Counter()
    for text in texts:
        for words, abbreviation in _DEFINITION.findall(text):
            letters = [c for c in abbreviation.rstrip("s").lower() if c.isalpha()]
            candidates = words.split()[-len(letters) :]
            if (
                len(letters) >= 2
                and len(candidates) == len(letters)
                and all(w[0].lower() == c for w, c in zip(candidates, letters))
            ):
                found[(abbreviation.rstrip("s"), " ".join(candidates).lower())] += 1
    pairs = sorted(pair for pair, count in found.items() if count >= min_count)
    return Glossary(tuple((abbr, long) for abbr, long in pairs))


def evaluate(path: Path, cache: Path, min_count: int) -> dict[str, Any]:
    dataset = load_beir(path)
    queries = dataset.judged_queries()
    glossary = mine_abbreviations([d.text for d in dataset.corpus.values()], min_count)
    rewriter = GlossaryQueryRewriter(glossary)
    ekb = open_eval_kb(dataset, cache, None, "auto")
    rows: dict[str, Any] = {"dataset": path.name, "glossary_pairs": len(glossary.groups)}
    rewritten = {q: rewriter.rewrite(text) for q, text in queries.items()}
    rows["queries"] = len(queries)
    rows["queries_rewritten"] = sum(len(r) > 1 for r in rewritten.values())
    try:
        for mode in ("auto", "bm25"):
            for label, probes in (("original", {q: [t] for q, t in queries.items()}),
                                  ("glossary", rewritten)):  # fmt: skip
                run = {}
                for query_id, texts in probes.items():
                    lists = [
                        ekb.kb.retrieve(t, top_k=100, mode=mode, per_document=True).doc_ids or []
                        for t in texts
                    ]
                    fused = rrf_fuse(lists)
                    run[query_id] = sorted(fused, key=lambda d: (-fused[d], d))[:100]
                qrels = {q: dataset.qrels[q] for q in queries}
                rows[f"{mode}/{label}"] = mean_metrics(per_query_metrics(qrels, run))
    finally:
        ekb.kb.close()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", default=["scifact", "cranfield"])
    parser.add_argument("--min-count", type=int, default=2)
    parser.add_argument("--cache", type=Path, default=Path(default_eval_cache()))
    args = parser.parse_args()
    if not DATASETS.is_dir():
        print(f"no datasets at {DATASETS}; nothing to measure", file=sys.stderr)
        return 0
    results = [evaluate(DATASETS / n, args.cache, args.min_count) for n in args.datasets]
    table = []
    for r in results:
        for mode in ("auto", "bm25"):
            before, after = r[f"{mode}/original"], r[f"{mode}/glossary"]
            table.append([r["dataset"], mode, r["glossary_pairs"],
                          f"{r['queries_rewritten']}/{r['queries']}", before["ndcg@10"],
                          after["ndcg@10"], after["ndcg@10"] - before["ndcg@10"],
                          before["recall@100"], after["recall@100"]])  # fmt: skip
    print_table(
        "Glossary rewriting (abbreviations mined from each corpus), documents fused by RRF",
        ["dataset", "mode", "glossary pairs", "queries rewritten", "nDCG@10 original",
         "nDCG@10 + glossary", "Δ", "R@100 original", "R@100 + glossary"],
        table,
    )  # fmt: skip
    print(f"\nwritten: {write_result('glossary', {'min_count': args.min_count, 'runs': results})}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
