"""BM25 benchmark for the core issue: quality and speed against bm25s and rank-bm25.

Run: ``python bench/bench_bm25.py`` (add ``--quick`` for a smoke run). Prints Markdown tables and
writes ``bench/results/<date>-bm25.json``. The peers run in the same process on the same tokens:
ragspine's tokenizer feeds bm25s (method "robertson", k1 1.5, b 0.75) and rank-bm25 (BM25Okapi).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATASETS, print_table, timed, write_result

from ragspine import Document, KnowledgeBase
from ragspine.eval.beir import BeirDataset, load_beir
from ragspine.eval.metrics import mean_metrics, per_query_metrics
from ragspine.eval.runner import document_text, run_eval
from ragspine.retrieval.chunking.chunking import chunk_document
from ragspine.retrieval.lexical.bm25 import DEFAULT_BM25_B, DEFAULT_BM25_K1
from ragspine.retrieval.lexical.index import BM25Index
from ragspine.retrieval.lexical.tokenizer import Tokenizer

QUALITY_SETS = ("scifact", "cranfield", "cisi", "cmrc2018-dev", "xquad-zh-en")
TOP_K = 100


def corpus_texts(ds: BeirDataset) -> tuple[list[str], list[str]]:
    ids = list(ds.corpus)
    return ids, [document_text(ds.corpus[d].title, ds.corpus[d].text) for d in ids]


def evaluate(ds: BeirDataset, run: dict[str, list[str]]) -> dict[str, float]:
    return mean_metrics(per_query_metrics({q: ds.qrels[q] for q in run}, run))


def build_ragspine(ds: BeirDataset, tokenizer: Tokenizer) -> tuple[BM25Index, list[str]]:
    ids, texts = corpus_texts(ds)
    index = BM25Index(tokenizer, k1=DEFAULT_BM25_K1, b=DEFAULT_BM25_B)
    index.apply([(i, d, t) for i, (d, t) in enumerate(zip(ids, texts))], [], 1)
    return index, ids


def build_bm25s(ds: BeirDataset, tokenizer: Tokenizer) -> tuple[Any, list[str]]:
    import bm25s

    ids, texts = corpus_texts(ds)
    retriever = bm25s.BM25(k1=DEFAULT_BM25_K1, b=DEFAULT_BM25_B, method="robertson")
    retriever.index([tokenizer(t) for t in texts], show_progress=False)
    return retriever, ids


def run_ragspine(index: BM25Index, ids: list[str], queries: dict[str, str]) -> dict[str, list[str]]:
    return {q: [ids[s] for s in index.ranked(text, TOP_K)[0]] for q, text in queries.items()}


def run_bm25s(
    retriever: Any, ids: list[str], queries: dict[str, str], tokenizer: Tokenizer
) -> dict[str, list[str]]:
    vocab = retriever.vocab_dict
    qids = list(queries)
    # bm25s rejects tokens outside its vocabulary; keep the known ones (they alone can score)
    tokens = [[t for t in tokenizer(queries[q]) if t in vocab] or [""] for q in qids]
    k = min(TOP_K, len(ids))
    docs, scores = retriever.retrieve(
        tokens, k=k, show_progress=False, n_threads=1, backend_selection="numpy"
    )
    return {q: [ids[d] for d, s in zip(docs[i], scores[i]) if s > 0] for i, q in enumerate(qids)}


def run_rank_bm25(
    ds: BeirDataset, tokenizer: Tokenizer, queries: dict[str, str]
) -> tuple[dict[str, list[str]], float, float]:
    from rank_bm25 import BM25Okapi

    ids, texts = corpus_texts(ds)
    start = time.perf_counter()
    model = BM25Okapi([tokenizer(t) for t in texts], k1=DEFAULT_BM25_K1, b=DEFAULT_BM25_B)
    build = time.perf_counter() - start
    start = time.perf_counter()
    run = {}
    for q, text in queries.items():
        scores = model.get_scores(tokenizer(text))
        top = np.argsort(-scores, kind="stable")[:TOP_K]
        run[q] = [ids[i] for i in top if scores[i] > 0]
    return run, build, time.perf_counter() - start


def quality(names: tuple[str, ...], query_limit: int | None) -> list[dict[str, Any]]:
    """Whole documents (the peers' unit) and the knowledge base as `ragspine eval` measures it."""
    rows = []
    for name in names:
        path = DATASETS / name
        if not path.is_dir():
            print(f"skip {name}: {path} missing", file=sys.stderr)
            continue
        ds = load_beir(path)
        queries = ds.judged_queries()
        if query_limit:
            queries = dict(list(queries.items())[:query_limit])
        for stemmer in ("none", "english"):
            tokenizer = Tokenizer(stemmer=stemmer)
            index, ids = build_ragspine(ds, tokenizer)
            retriever, bids = build_bm25s(ds, tokenizer)
            ours = evaluate(ds, run_ragspine(index, ids, queries))
            peer = evaluate(ds, run_bm25s(retriever, bids, queries, tokenizer))
            with tempfile.TemporaryDirectory() as tmp:
                os.environ["RAGSPINE_STEMMER"] = stemmer
                try:
                    (kb, *_), _ = run_eval(
                        path, modes=["bm25"], limit_queries=query_limit, cache_dir=tmp
                    )
                finally:
                    del os.environ["RAGSPINE_STEMMER"]
            rows.append({
                "dataset": name, "stemmer": stemmer, "queries": len(queries),
                "ragspine_ndcg@10": ours["ndcg@10"], "bm25s_ndcg@10": peer["ndcg@10"],
                "delta_ndcg@10": ours["ndcg@10"] - peer["ndcg@10"],
                "ragspine_recall@100": ours["recall@100"], "bm25s_recall@100": peer["recall@100"],
                "kb_chunked_ndcg@10": kb["ndcg@10"], "kb_chunked_recall@100": kb["recall@100"],
            })  # fmt: skip
    return rows


def speed(repeat: int, query_limit: int | None) -> dict[str, Any]:
    ds = load_beir(DATASETS / "scifact")
    queries = ds.judged_queries()
    if query_limit:
        queries = dict(list(queries.items())[:query_limit])
    tokenizer = Tokenizer(stemmer="english")
    (index, ids), ours_build = timed(lambda: build_ragspine(ds, tokenizer), repeat)
    (retriever, bids), peer_build = timed(lambda: build_bm25s(ds, tokenizer), repeat)
    _, ours_query = timed(lambda: run_ragspine(index, ids, queries), repeat)
    _, peer_query = timed(lambda: run_bm25s(retriever, bids, queries, tokenizer), repeat)
    rank_queries = dict(list(queries.items())[:60])
    _, rank_build, rank_query = run_rank_bm25(ds, tokenizer, rank_queries)
    with tempfile.TemporaryDirectory() as tmp:
        kb = KnowledgeBase(Path(tmp) / "kb")
        kb.add_documents(Document(d, t) for d, t in zip(*corpus_texts(ds)))
        _, kb_query = timed(lambda: [kb.search(t, top_k=10) for t in queries.values()], repeat)
        latencies = []
        for text in queries.values():
            start = time.perf_counter()
            kb.search(text, top_k=10)
            latencies.append(time.perf_counter() - start)
        kb.close()
    n = len(queries)
    return {
        "dataset": "scifact", "docs": len(ds.corpus), "queries": n, "top_k": TOP_K,
        "build_s": {"ragspine": ours_build, "bm25s": peer_build, "rank_bm25": rank_build},
        "build_ratio_ragspine_over_bm25s": ours_build / peer_build,
        "qps": {"ragspine": n / ours_query, "bm25s": n / peer_query,
                "rank_bm25": len(rank_queries) / rank_query},
        "qps_ratio_vs_bm25s": peer_query / ours_query,
        "qps_ratio_vs_rank_bm25": (n / ours_query) / (len(rank_queries) / rank_query),
        "kb_search_top10": {"qps": n / kb_query,
                            "p50_ms": 1000 * float(np.percentile(latencies, 50)),
                            "p95_ms": 1000 * float(np.percentile(latencies, 95))},
    }  # fmt: skip


def scale_corpus(target_chunks: int) -> list[Document]:
    """Real text from every shared dataset, repeated under new ids until the target is reached."""
    base = []
    for name in QUALITY_SETS:
        if (DATASETS / name).is_dir():
            ds = load_beir(DATASETS / name)
            base.extend((f"{name}/{d}", t) for d, t in zip(*corpus_texts(ds)))
    chunk_counts = [len(chunk_document(text)) for _, text in base]
    docs: list[Document] = []
    n_chunks = 0
    copy = 0
    while n_chunks < target_chunks:
        for (doc_id, text), count in zip(base, chunk_counts):
            docs.append(Document(f"{doc_id}~{copy}", text))
            n_chunks += count
            if n_chunks >= target_chunks:
                break
        copy += 1
    return docs


def scale(target_chunks: int) -> dict[str, Any]:
    docs = scale_corpus(target_chunks)
    extra = Document("extra/new-document", "A freshly added note about BM25 index maintenance. "
                     "增量索引只写一个新的小段。" * 3)  # fmt: skip
    tmp = Path(tempfile.mkdtemp())
    try:
        kb = KnowledgeBase(tmp / "kb")
        _, full_build = timed(lambda: kb.add_documents(docs))
        chunks = kb.store.counts()["chunks"]
        _, add_one = timed(lambda: kb.add_documents([extra]))
        stats = kb.stats()
        latencies = []
        for text in list(load_beir(DATASETS / "scifact").judged_queries().values())[:200]:
            start = time.perf_counter()
            kb.search(text, top_k=10)
            latencies.append(time.perf_counter() - start)
        kb.close()

        def rebuild_index() -> BM25Index:
            shutil.rmtree(tmp / "kb" / "lexical")
            fresh = KnowledgeBase(tmp / "kb")
            fresh._sync_index(persist=True)
            fresh.close()
            return fresh._index

        _, index_rebuild = timed(rebuild_index)
        kb = KnowledgeBase(tmp / "kb")
        extra2 = Document("extra/second", "Another small document to add incrementally.")
        _, add_one_again = timed(lambda: kb.add_documents([extra2]))
        kb.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "documents": len(docs), "chunks": chunks,
        "full_ingest_s": full_build, "index_rebuild_s": index_rebuild,
        "add_one_document_s": add_one, "add_one_after_reopen_s": add_one_again,
        "add_one_over_full_ingest": add_one / full_build,
        "add_one_over_index_rebuild": add_one / index_rebuild,
        "index_memory_mb": stats["index"]["memory_bytes"] / 2**20,
        "index_disk_mb": stats["index"]["disk_bytes"] / 2**20,
        "store_disk_mb": stats["store_bytes"] / 2**20,
        "vocabulary": stats["index"]["vocabulary"],
        "search_top10_p50_ms": 1000 * float(np.percentile(latencies, 50)),
        "search_top10_p95_ms": 1000 * float(np.percentile(latencies, 95)),
        "note": "real text from the shared datasets, repeated under new doc ids to reach the size",
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--datasets", nargs="*", default=list(QUALITY_SETS))
    parser.add_argument("--scale-chunks", type=int, default=100_000)
    parser.add_argument("--skip-scale", action="store_true")
    args = parser.parse_args()
    if not DATASETS.is_dir():
        print(f"no datasets at {DATASETS}; nothing to measure", file=sys.stderr)
        return
    limit = 50 if args.quick else None
    repeat = 1 if args.quick else 5
    result: dict[str, Any] = {"quality": quality(tuple(args.datasets), limit)}
    print_table(
        "BM25 quality (same tokens; whole documents; KB = default chunking, best chunk per doc)",
        ["dataset", "stem", "ragspine nDCG@10", "bm25s nDCG@10", "Δ", "ragspine R@100",
         "bm25s R@100", "KB nDCG@10", "KB R@100"],
        [[r["dataset"], r["stemmer"], r["ragspine_ndcg@10"], r["bm25s_ndcg@10"],
          r["delta_ndcg@10"], r["ragspine_recall@100"], r["bm25s_recall@100"],
          r["kb_chunked_ndcg@10"], r["kb_chunked_recall@100"]] for r in result["quality"]],
    )  # fmt: skip
    if (DATASETS / "scifact").is_dir():
        sp = result["speed"] = speed(repeat, limit)
        print_table(
            f"BM25 speed on scifact ({sp['docs']} docs, {sp['queries']} queries, top-{TOP_K})",
            ["system", "index build s", "queries/s", "ragspine speed-up"],
            [["ragspine", sp["build_s"]["ragspine"], sp["qps"]["ragspine"], "1.0"],
             ["bm25s (numpy)", sp["build_s"]["bm25s"], sp["qps"]["bm25s"],
              f"{sp['qps_ratio_vs_bm25s']:.2f}x"],
             ["rank-bm25", sp["build_s"]["rank_bm25"], sp["qps"]["rank_bm25"],
              f"{sp['qps_ratio_vs_rank_bm25']:.1f}x"]],
        )  # fmt: skip
        kbs = sp["kb_search_top10"]
        print(f"\nKnowledgeBase.search (top-10 snippets): {kbs['qps']:.0f} q/s, "
              f"p50 {kbs['p50_ms']:.2f} ms, p95 {kbs['p95_ms']:.2f} ms")  # fmt: skip
    if not args.skip_scale:
        target = 5_000 if args.quick else args.scale_chunks
        sc = result["scale"] = scale(target)
        print_table(
            f"Incremental add at {sc['chunks']} chunks",
            ["full ingest s", "index rebuild s", "add one doc s", "add/full ingest",
             "add/index rebuild", "index MB (memory)", "index MB (disk)", "store MB",
             "search p50 ms", "search p95 ms"],
            [[sc["full_ingest_s"], sc["index_rebuild_s"], sc["add_one_document_s"],
              f"{100 * sc['add_one_over_full_ingest']:.3f}%",
              f"{100 * sc['add_one_over_index_rebuild']:.3f}%",
              sc["index_memory_mb"], sc["index_disk_mb"], sc["store_disk_mb"],
              sc["search_top10_p50_ms"], sc["search_top10_p95_ms"]]],
        )  # fmt: skip
    path = write_result("bm25-quick" if args.quick else "bm25", result)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
