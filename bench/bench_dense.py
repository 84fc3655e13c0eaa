"""Dense-channel benchmark: ingest vs raw embedder throughput, hybrid latency, ANN recall.

Run: ``python bench/bench_dense.py [--embedding minilm] [--chunks 100000] [--ann-vectors 200000]``.
Prints tables and writes ``bench/results/<date>-dense.json``.

- Throughput: the same passages through ``embed_matrix`` alone and through
  ``KnowledgeBase.add_documents`` (chunking, SQLite, BM25 and vectors), as passages/s.
- Latency: hybrid ``retrieve`` p50 against one query embedding plus one BM25 query, at the given
  size, with the knowledge base's default vector search (HNSW from 50,000 vectors). Vectors for
  the filler chunks are real vectors plus small noise (embedding 100k passages here takes
  hours); the JSON says so.
- ANN: recall@10 of HNSW with × 5 oversampling against exact search on real vectors, tiled with
  small noise to reach the size when fewer real vectors exist (stated in the JSON).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATASETS, RESULTS, print_table, write_result

from ragspine import Document, KnowledgeBase
from ragspine.eval.beir import load_beir
from ragspine.eval.runner import document_text
from ragspine.retrieval.chunking.chunking import chunk_document
from ragspine.retrieval.vector.embedding_backends import embed_matrix, make_embedding_backend
from ragspine.retrieval.vector.store import ExactVectorStore


def passages(limit: int) -> list[str]:
    ds = load_beir(DATASETS / "scifact")
    texts = [document_text(d.title, d.text) for d in ds.corpus.values()]
    chunks = [c.text for t in texts for c in chunk_document(t)]
    return chunks[:limit]


def throughput(spec: str, n: int) -> dict[str, Any]:
    texts = passages(n)
    backend = make_embedding_backend(spec)
    assert backend is not None
    embed_matrix(backend, texts[:8], kind="passage")  # load the model first
    start = time.perf_counter()
    embed_matrix(backend, texts, kind="passage")
    raw = len(texts) / (time.perf_counter() - start)
    with tempfile.TemporaryDirectory() as tmp:
        kb = KnowledgeBase(Path(tmp) / "kb", embedding=backend, chunk_chars=10_000)
        start = time.perf_counter()
        kb.add_documents(Document(f"p{i}", t) for i, t in enumerate(texts))
        ingest = len(texts) / (time.perf_counter() - start)
        kb.close()
    return {"passages": len(texts), "raw_per_s": raw, "ingest_per_s": ingest,
            "ingest_over_raw": ingest / raw}  # fmt: skip


FILLER = "\u2063#"  # invisible separator + copy number: each filler chunk is distinct text


class ReplayEmbedding:
    """Real vectors for a fixed set of passages (looked up, not recomputed), the real model for
    queries: lets a large knowledge base be built from repeated passages in minutes. A copy
    (``text + FILLER + n``) gets its passage's vector plus N(0, 0.02) noise seeded by ``n``, so
    that no two chunks share a vector (duplicates would flatter or hobble an HNSW graph)."""

    def __init__(self, backend: Any, texts: list[str]) -> None:
        self.backend = backend
        self.model_id = backend.model_id
        self.dimension = backend.dimension
        matrix = embed_matrix(backend, texts, kind="passage")
        self.known = {t: matrix[i] for i, t in enumerate(texts)}

    def _passage(self, text: str) -> np.ndarray:
        base, _, copy = text.partition(FILLER)
        vector = self.known[base]
        if copy:
            noise = np.random.default_rng(int(copy)).normal(0, 0.02, vector.shape)
            vector = vector + noise.astype(np.float32)
        return vector / np.linalg.norm(vector)

    def embed_array(self, texts: list[str], *, kind: str = "passage") -> np.ndarray:
        if kind == "query":
            return embed_matrix(self.backend, texts, kind="query")
        return np.stack([self._passage(t) for t in texts]).astype(np.float32)

    def embed_texts(self, texts: list[str]) -> list[list[float]]:
        return self.embed_array(texts).tolist()  # type: ignore[no-any-return]


def latency(spec: str, target_chunks: int, real: int) -> dict[str, Any]:
    """Hybrid p50 vs (query embedding + BM25) at ``target_chunks`` chunks."""
    texts = passages(real)
    backend = make_embedding_backend(spec)
    assert backend is not None
    replay = ReplayEmbedding(backend, texts)
    queries = list(load_beir(DATASETS / "scifact").judged_queries().values())  # 300
    with tempfile.TemporaryDirectory() as tmp:
        kb = KnowledgeBase(Path(tmp) / "kb", chunk_chars=10_000, embedding=replay)
        kb.add_documents(
            Document(f"p{i}", texts[i] if i < len(texts) else f"{texts[i % len(texts)]}{FILLER}{i}")
            for i in range(target_chunks)
        )
        search = kb.stats()["vectors"]["search"]
        hybrid, single = [], []
        for q in queries:
            start = time.perf_counter()
            kb.retrieve(q, top_k=10, mode="hybrid")
            hybrid.append(time.perf_counter() - start)
            start = time.perf_counter()
            embed_matrix(backend, [q], kind="query")
            kb.retrieve(q, top_k=10, mode="bm25")
            single.append(time.perf_counter() - start)
        kb.close()
    p50_h, p50_s = statistics.median(hybrid) * 1000, statistics.median(single) * 1000
    return {
        "chunks": target_chunks,
        "real_vectors": real,
        "hybrid_p50_ms": p50_h,
        "embed_plus_bm25_p50_ms": p50_s,
        "ratio": p50_h / p50_s,
        "vector_search": search,
        "note": f"{real} real passages, copies with N(0, 0.02) noise on their vectors to the size",
    }


def real_vectors(paths: list[Path]) -> np.ndarray:
    """The present rows of saved knowledge-base vector stores (``KB/vectors`` folders)."""
    parts = []
    for path in paths:
        store, _ = ExactVectorStore.load(path)
        parts.append(store.vectors(np.flatnonzero(store.present).tolist()))
    return np.concatenate(parts)


def ann_recall(
    spec: str, n_vectors: int, real: int, from_kbs: list[Path], ef_search: int
) -> dict[str, Any]:
    from ragspine.retrieval.vector.ann import HnswVectorStore

    backend = make_embedding_backend(spec)
    assert backend is not None
    if from_kbs:
        base = real_vectors(from_kbs)
        source = f"{len(base)} real chunk vectors from {len(from_kbs)} knowledge base(s)"
    else:
        base = embed_matrix(backend, passages(real), kind="passage")
        source = f"{len(base)} real scifact passages embedded here"
    questions = list(load_beir(DATASETS / "scifact").judged_queries().values())[:200]
    queries = embed_matrix(backend, questions, kind="query")
    rng = np.random.default_rng(0)
    tiles = [base] + [
        base + rng.normal(0, 0.02, base.shape).astype(np.float32)
        for _ in range((n_vectors - 1) // len(base))
    ]
    matrix = np.concatenate(tiles)[:n_vectors]
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    exact = ExactVectorStore(backend.dimension)
    ann = HnswVectorStore(backend.dimension, ef_search=ef_search)
    ids = list(range(n_vectors))
    exact.upsert(ids, matrix)
    start = time.perf_counter()
    ann.upsert(ids, matrix)
    build = time.perf_counter() - start
    recalls, t_exact, t_ann = [], [], []
    for q in queries:
        start = time.perf_counter()
        want = {i for i, _ in exact.query(q, 10)}
        t_exact.append(time.perf_counter() - start)
        start = time.perf_counter()
        got = {i for i, _ in ann.query(q, 10)}
        t_ann.append(time.perf_counter() - start)
        recalls.append(len(want & got) / 10)
    real_rows = min(len(base), n_vectors)
    return {"vectors": n_vectors, "real_vectors": real_rows, "oversample": ann.oversample,
            "ef_search": ef_search, "queries": len(queries),
            "recall@10": float(np.mean(recalls)), "build_s": build,
            "exact_p50_ms": statistics.median(t_exact) * 1000,
            "ann_p50_ms": statistics.median(t_ann) * 1000,
            "note": f"{source}; the rest are copies with N(0, 0.02) noise "
                    "(near-duplicates: harder for a graph than real text)"}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedding", default="minilm")
    parser.add_argument("--passages", type=int, default=1000)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--ann-vectors", type=int, default=200_000)
    parser.add_argument("--real", type=int, default=2000, help="real vectors to embed")
    parser.add_argument(
        "--vectors-from", type=Path, nargs="*", default=[], metavar="KB/vectors",
        help="take the ANN test's real vectors from saved knowledge bases (same model)",
    )  # fmt: skip
    parser.add_argument("--ef-search", type=int, default=128)
    parser.add_argument(
        "--parts", nargs="*", default=["throughput", "latency", "ann"],
        choices=["throughput", "latency", "ann"],
    )  # fmt: skip
    args = parser.parse_args()
    if not (DATASETS / "scifact").is_dir():
        print(f"no datasets at {DATASETS}; nothing to measure", file=sys.stderr)
        return
    result: dict[str, Any] = {"embedding": args.embedding}
    if "throughput" in args.parts:
        tp = result["throughput"] = throughput(args.embedding, args.passages)
        print_table(
            "Ingest vs raw embedder",
            ["passages", "raw /s", "ingest /s", "ingest/raw"],
            [[tp["passages"], tp["raw_per_s"], tp["ingest_per_s"], tp["ingest_over_raw"]]],
        )
    if "latency" in args.parts:
        lt = result["latency"] = latency(args.embedding, args.chunks, args.real)
        print_table(
            f"Hybrid latency at {lt['chunks']} chunks (vector search: {lt['vector_search']})",
            ["hybrid p50 ms", "embed + BM25 p50 ms", "ratio"],
            [[lt["hybrid_p50_ms"], lt["embed_plus_bm25_p50_ms"], lt["ratio"]]],
        )
    if "ann" in args.parts:
        ar = result["ann"] = ann_recall(
            args.embedding, args.ann_vectors, args.real, args.vectors_from, args.ef_search
        )
        print_table(
            f"HNSW × {ar['oversample']} oversampling at {ar['vectors']} vectors "
            f"({ar['real_vectors']} real), efSearch {ar['ef_search']}",
            ["recall@10", "build s", "exact p50 ms", "ann p50 ms"],
            [[ar["recall@10"], ar["build_s"], ar["exact_p50_ms"], ar["ann_p50_ms"]]],
        )
    previous = RESULTS / f"{date.today().isoformat()}-dense.json"
    if set(args.parts) != {"throughput", "latency", "ann"} and previous.is_file():
        # a partial run updates its parts of today's file and keeps the others
        kept = json.loads(previous.read_text(encoding="utf-8"))
        if kept.get("embedding") == args.embedding:
            result = {**kept, **result}
    print(f"\nwrote {write_result('dense', result)}")


if __name__ == "__main__":
    main()
