"""``ragspine eval``: ingest a BEIR collection once (cached), run every mode, score it (R93).

A document is ranked by its best chunk. The knowledge base is cached by the corpus content and
every setting that shapes the index, so a second run reuses it. Peers (bm25s, rank-bm25) index the
same chunks with the same tokenizer, so quality and speed compare like for like.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ragspine.config import Settings
from ragspine.eval.beir import BeirDataset, load_beir
from ragspine.eval.metrics import mean_metrics, per_query_metrics
from ragspine.ingest import Document
from ragspine.knowledge_base import KB_FORMAT, KnowledgeBase
from ragspine.retrieval.hybrid import RERANK_DEPTH, Ranking
from ragspine.retrieval.lexical.index import BM25Index
from ragspine.retrieval.lexical.tokenizer import TOKENIZER_VERSION, Tokenizer
from ragspine.retrieval.rerank.base import RerankChain
from ragspine.retrieval.rerank.cross_encoder import make_reranker
from ragspine.retrieval.vector.embedding_backends import (
    auto_embedding_spec,
    make_embedding_backend,
)

Progress = Callable[[str, int, int], None]
_MAX_CHUNKS_PER_DOC = 20
PEERS = ("bm25s", "rank-bm25")


@dataclass(frozen=True)
class EvalKnowledgeBase:
    kb: KnowledgeBase
    index_s: float
    cached: bool


def available_modes(embedding: str | None = None) -> list[str]:
    """The distinct retrieval pipelines (aliases left out): BM25 always, the dense ones when an
    embedding backend is named."""
    return ["bm25", "vector", "hybrid"] if embedding else ["bm25"]


def document_text(title: str, text: str) -> str:
    """Title and text are both indexed: the title opens the document."""
    return f"{title}\n\n{text}" if title else text


def _cache_key(dataset: BeirDataset, settings: Settings, embedding: str | None) -> str:
    """What the stored chunks and vectors depend on; the lexical index is left out because a
    knowledge base rebuilds an index of an older format by itself."""
    digest = hashlib.sha256()
    for doc_id in sorted(dataset.corpus):
        doc = dataset.corpus[doc_id]
        record = [doc_id, doc.title, doc.text, doc.metadata]
        digest.update(json.dumps(record, sort_keys=True, ensure_ascii=False).encode())
        digest.update(b"\n")
    shape = {
        "kb": KB_FORMAT,
        "tokenizer": TOKENIZER_VERSION,
        "chunk_chars": settings.chunk_chars,
        "overlap_chars": settings.overlap_chars,
        "stemmer": settings.stemmer,
        "k1": settings.bm25_k1,
        "b": settings.bm25_b,
        "embedding": embedding,
    }
    digest.update(json.dumps(shape, sort_keys=True).encode())
    return digest.hexdigest()[:20]


def open_eval_kb(
    dataset: BeirDataset,
    cache_dir: Path,
    progress: Progress | None = None,
    embedding: str | None = None,
) -> EvalKnowledgeBase:
    """Reuse the cached knowledge base for this corpus and these settings, or build it."""
    settings = Settings.from_env()
    if embedding == "auto":  # what a knowledge base would choose for this corpus
        embedding = auto_embedding_spec([d.text for d in dataset.corpus.values()])
    backend = make_embedding_backend(embedding) if embedding else None
    model_id = backend.model_id if backend is not None else None
    path = cache_dir / f"{dataset.name}-{_cache_key(dataset, settings, model_id)}"
    marker = path / "eval.json"
    cached = marker.is_file()
    if not cached:
        staging = cache_dir / f".{path.name}.{os.getpid()}.tmp"
        shutil.rmtree(staging, ignore_errors=True)
        staging.parent.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        with KnowledgeBase(staging, embedding=embedding or "none") as kb:
            kb.add_documents(
                (
                    Document(doc_id, document_text(d.title, d.text), d.title, dict(d.metadata))
                    for doc_id, d in dataset.corpus.items()
                ),
                progress=None
                if progress is None
                else lambda a, b, phase: progress("embed" if phase == "embed" else "ingest", a, b),
            )
        index_s = time.perf_counter() - start
        (staging / "eval.json").write_text(json.dumps({"index_s": index_s}), encoding="utf-8")
        if path.exists():
            shutil.rmtree(path)
        os.replace(staging, path)
    kb = KnowledgeBase(path, create=False, embedding=backend)
    index_s = float(json.loads(marker.read_text(encoding="utf-8"))["index_s"])
    return EvalKnowledgeBase(kb, index_s, cached)


def fold_to_documents(positions: Sequence[int], documents: Sequence[str], top_k: int) -> list[str]:
    """Documents in the order of their best chunk."""
    return list(dict.fromkeys(map(documents.__getitem__, positions)))[:top_k]


@dataclass
class _Timing:
    latencies: list[float]
    loop_s: float
    metrics_s: float

    def summary(self) -> dict[str, Any]:
        search_s = sum(self.latencies)
        ordered = np.asarray(self.latencies) * 1000
        return {
            "latency_ms": {
                "p50": float(np.percentile(ordered, 50)) if ordered.size else 0.0,
                "p95": float(np.percentile(ordered, 95)) if ordered.size else 0.0,
            },
            "qps": len(self.latencies) / search_s if search_s else 0.0,
            "search_s": search_s,
            "overhead_pct": 100 * (self.loop_s - search_s) / search_s if search_s else 0.0,
            "metrics_s": self.metrics_s,
        }


def _run_queries(
    queries: dict[str, str],
    search: Callable[[str], list[str]],
    top_k: int,
    qrels: dict[str, dict[str, int]],
    progress: Progress | None,
    label: str,
) -> tuple[dict[str, float], _Timing]:
    """Time each document-level search alone; what the query loop adds on top is the overhead;
    scoring the run afterwards is timed apart."""
    latencies: list[float] = []
    run: dict[str, list[str]] = {}
    loop_start = time.perf_counter()
    for done, (query_id, text) in enumerate(queries.items(), start=1):
        start = time.perf_counter()
        documents = search(text)
        latencies.append(time.perf_counter() - start)
        run[query_id] = documents
        if progress is not None and (done % 50 == 0 or done == len(queries)):
            progress(label, done, len(queries))
    loop_s = time.perf_counter() - loop_start
    start = time.perf_counter()
    metrics = mean_metrics(per_query_metrics({q: qrels[q] for q in queries}, run))
    return metrics, _Timing(latencies, loop_s, time.perf_counter() - start)


def _peer_search(
    name: str, texts: list[str], documents: list[str], tokenizer: Tokenizer, depth: int, top_k: int
) -> tuple[Callable[[str], list[str]], float]:
    """A peer built on the same chunks and tokens, searching documents by their best chunk
    (as ragspine's per-document retrieval does); returns the search and its build time."""
    start = time.perf_counter()
    if name == "bm25s":
        import bm25s

        retriever = bm25s.BM25(k1=1.5, b=0.75, method="robertson")
        retriever.index([tokenizer(t) for t in texts], show_progress=False)
        vocab = retriever.vocab_dict
        k = min(depth, len(texts))

        def search(query: str) -> list[str]:
            tokens = [t for t in tokenizer(query) if t in vocab] or [""]
            found, scores = retriever.retrieve(
                [tokens], k=k, show_progress=False, n_threads=1, backend_selection="numpy"
            )
            return fold_to_documents(
                [i for i, s in zip(found[0], scores[0]) if s > 0], documents, top_k
            )

    elif name == "rank-bm25":
        from rank_bm25 import BM25Okapi

        model = BM25Okapi([tokenizer(t) for t in texts], k1=1.5, b=0.75)

        def search(query: str) -> list[str]:
            scores = model.get_scores(tokenizer(query))
            top = np.argsort(-scores, kind="stable")[:depth]
            return fold_to_documents([i for i in top if scores[i] > 0], documents, top_k)

    else:
        raise ValueError(f"unknown peer {name!r}; choose from {PEERS}")
    return search, time.perf_counter() - start


def run_eval(
    dataset_dir: str | Path,
    *,
    modes: Sequence[str] = ("auto",),
    top_k: int = 100,
    limit_queries: int | None = None,
    cache_dir: str | Path,
    compare_peers: bool = False,
    progress: Progress | None = None,
    embedding: str | None = None,
    rerank: str | None = None,
) -> tuple[list[dict[str, Any]], BeirDataset]:
    """One result per mode (then per peer), each with the documented keys; with ``rerank``,
    each mode is followed by the same mode reranked (``rerank``, ``rerank_added_ms``)."""
    if top_k <= 0:
        raise ValueError(f"top_k must be positive, got {top_k}")
    dataset = load_beir(dataset_dir)
    queries = dataset.judged_queries()
    if limit_queries is not None:
        queries = dict(list(queries.items())[:limit_queries])
    ekb = open_eval_kb(dataset, Path(cache_dir), progress, embedding)
    results: list[dict[str, Any]] = []
    base = {"dataset": dataset.name, "docs": len(dataset.corpus), "queries": len(queries)}
    chain = make_reranker(rerank) if rerank else None
    try:
        for mode in modes:
            ekb.kb.retrieve("warm up", top_k=1, mode=mode, per_document=True)
            row = _mode_row(ekb, mode, None, queries, dataset, top_k, progress)
            results.append({**base, **row})
            if chain is not None:
                reranked = _mode_row(ekb, mode, chain, queries, dataset, top_k, progress)
                added = reranked["latency_ms"]["p50"] - row["latency_ms"]["p50"]
                results.append({**base, **reranked, "rerank": rerank,
                                "rerank_added_ms": {"p50": added}})  # fmt: skip
        if compare_peers:
            results.extend(_peers(ekb, queries, dataset, base, top_k, results[0], progress))
    finally:
        ekb.kb.close()
    return results, dataset


def _mode_row(
    ekb: EvalKnowledgeBase,
    mode: str,
    chain: RerankChain | None,
    queries: dict[str, str],
    dataset: BeirDataset,
    top_k: int,
    progress: Progress | None,
) -> dict[str, Any]:
    """Quality and speed of one mode, reranked by ``chain`` when one is given."""
    degraded: list[str] = []

    def search(text: str) -> list[str]:
        ranking = ekb.kb.retrieve(text, top_k=top_k, mode=mode, per_document=True)
        if chain is None:
            return ranking.doc_ids or []
        return _reranked_documents(ekb.kb, chain, text, ranking, degraded)

    label = mode if chain is None else f"{mode}+{chain.name}"
    metrics, timing = _run_queries(queries, search, top_k, dataset.qrels, progress, label)
    row = {"mode": mode, **metrics, **timing.summary(), "index_s": ekb.index_s,
           "cached": ekb.cached, "chunks": ekb.kb.store.counts()["chunks"],
           "embedding": ekb.kb.embedding.model_id if ekb.kb.embedding else None}  # fmt: skip
    if chain is not None:
        row.update(rerank_depth=RERANK_DEPTH, degraded_queries=len(degraded))
    return row


def _reranked_documents(
    kb: KnowledgeBase, chain: RerankChain, query: str, ranking: Ranking, degraded: list[str]
) -> list[str]:
    """Documents in reranked order: each document's best chunk among the first
    ``RERANK_DEPTH`` goes through the chain, the rest keep their places after them."""
    doc_ids = ranking.doc_ids or []
    head = replace(
        ranking,
        slots=ranking.slots[:RERANK_DEPTH],
        chunk_ids=ranking.chunk_ids[:RERANK_DEPTH],
        scores={k: v[:RERANK_DEPTH] for k, v in ranking.scores.items()},
        doc_ids=None,
    )  # same snapshot as the ranking: snippets are fetched as they were ranked
    document_of = dict(zip(ranking.chunk_ids, doc_ids))
    outcome = chain.apply(query, kb.snippets(head))
    degraded.extend(outcome.degraded_reasons)
    reranked = [document_of[s.chunk_id] for s in outcome.results]
    return reranked + [d for d in doc_ids if d not in set(reranked)]


def _peers(
    ekb: EvalKnowledgeBase,
    queries: dict[str, str],
    dataset: BeirDataset,
    base: dict[str, Any],
    top_k: int,
    ours: dict[str, Any],
    progress: Progress | None,
) -> list[dict[str, Any]]:
    """Peers on the same chunks, and ratios against ragspine measured in this same run."""
    rows = ekb.kb.store.execute_read(
        "SELECT row_id, chunk_id, text, doc_id FROM narrative_chunk WHERE active = 1 "
        "ORDER BY row_id"
    )
    texts = [r[2] for r in rows]
    documents = [r[3] for r in rows]
    per_document = Counter(documents)
    # deep enough that top_k documents are always among the chunks a peer returns
    depth = top_k * min(_MAX_CHUNKS_PER_DOC, max(per_document.values(), default=1))
    tokenizer = ekb.kb.tokenizer
    start = time.perf_counter()
    rebuilt = BM25Index(tokenizer, k1=ekb.kb.settings.bm25_k1, b=ekb.kb.settings.bm25_b)
    rebuilt.apply([(r[0], r[1], r[2]) for r in rows], [], 1)
    our_index_s = time.perf_counter() - start
    ours["index_rebuild_s"] = our_index_s
    out = []
    for name in PEERS:
        search, build_s = _peer_search(name, texts, documents, tokenizer, depth, top_k)
        metrics, timing = _run_queries(queries, search, top_k, dataset.qrels, progress, name)
        summary = timing.summary()
        out.append(
            {
                **base,
                "mode": name,
                **metrics,
                **summary,
                "index_s": build_s,
                "chunks": len(texts),
                "ragspine_speedup": {
                    "qps": ours["qps"] / summary["qps"] if summary["qps"] else None,
                    "latency_p50": summary["latency_ms"]["p50"] / ours["latency_ms"]["p50"]
                    if ours["latency_ms"]["p50"]
                    else None,
                    "index": build_s / our_index_s if our_index_s else None,
                },
            }
        )
    return out
