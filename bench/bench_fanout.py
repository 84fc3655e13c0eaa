"""Fan-out over several knowledge bases (R31): 3 sub-questions × 3 knowledge bases at once.

Run: ``python bench/bench_fanout.py [--cache DIR] [--embedding none|auto] [--rounds 200]
[--wait-ms 50] [--remote-ms 50 200] [--remote-rounds 30]``. The target: the fan-out takes at
most 1.5× the slowest of its single searches. The three bases hold the scifact, cranfield and
cisi corpora. Each round takes one real query of each dataset as the three sub-questions and
times, in turn:

1. each of the 9 (sub-question, base) searches alone, one after another: the slowest of them is
   the round's reference;
2. the fan-out: ``MultiIndexRetriever.search`` over the 3 queries and 3 bases (9 workers);
3. the same retriever with one worker: the sequential loop, for contrast.

Three settings, because threads overlap waiting but not computing:

- ``local``: the eval cache's knowledge bases (BM25 by default; hybrid with the local ONNX model
  with ``--embedding auto``). Every search is CPU work in this process, so with C cores nine of
  them take at least the sum of their times divided by C (and BM25 also holds the GIL).
- ``remote store``: the same bases behind a round trip of ``--wait-ms`` each (simulated: a
  sleep before each real search, as a networked vector store would add): what the fan-out
  does when searches mostly wait.
- ``remote embedding``: hybrid knowledge bases whose query vectors come from an OpenAI-compatible
  embedding service on 127.0.0.1 that answers after each of ``--remote-ms`` (a hosted or
  networked model; its vectors are hashes of the text, so only the latency is real; the service
  runs in this process and its own CPU counts).

``--wait-ms`` or ``--remote-ms`` with no value skips that setting.

Prints a table and writes ``bench/results/<date>-fanout.json``. The LLM that would decompose a
question into sub-questions runs once before the fan-out and is not timed here: the figures are
the fan-out alone (the model's time adds to them). Every base is searched (no router).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from common import DATASETS, print_table, write_result

from ragspine import Document, KnowledgeBase
from ragspine.eval.beir import BeirDataset, load_beir
from ragspine.eval.runner import document_text, open_eval_kb
from ragspine.retrieval.link.narrative_link import SearchIndex
from ragspine.retrieval.link.snippet import ResultList, Snippet
from ragspine.retrieval.multi_index import MultiIndexRetriever
from ragspine.retrieval.rerank.base import Reranker
from ragspine.retrieval.vector.embedding_backends import OpenAIEmbeddingBackend
from tests.openai_server import fake_embeddings, openai_server

BASES = ("scifact", "cranfield", "cisi")
TARGET = 1.5
WARMUP = 5


def seconds(call: Callable[..., object], *args: Any, **kwargs: Any) -> float:
    start = time.perf_counter()
    call(*args, **kwargs)
    return time.perf_counter() - start


def ms(values: list[float], q: float) -> float:
    """The ``q``-th percentile, in milliseconds."""
    return float(np.percentile(values, q)) * 1000


class RemoteStore:
    """A knowledge base behind a network round trip of ``wait`` seconds."""

    def __init__(self, kb: KnowledgeBase, wait: float) -> None:
        self.kb = kb
        self.wait = wait

    def search(
        self,
        query: str,
        *,
        top_k: int = 10,
        filters: Mapping[str, Any] | None = None,
        doc_ids: Sequence[str] | None = None,
        mode: str | None = None,
        rerank: str | Reranker | None = None,
        include_restricted: bool = True,
    ) -> ResultList[Snippet]:
        time.sleep(self.wait)
        return self.kb.search(
            query,
            top_k=top_k,
            filters=filters,
            doc_ids=doc_ids,
            mode=mode,
            rerank=rerank,
            include_restricted=include_restricted,
        )


def measure(
    kbs: Mapping[str, SearchIndex], queries: dict[str, list[str]], rounds: int, top_k: int
) -> dict[str, list[float]]:
    """Per round: the slowest single search, the sum of the singles, the fan-out, the loop."""
    times: dict[str, list[float]] = {"slowest": [], "sum": [], "fanout": [], "sequential": []}
    with (
        MultiIndexRetriever(kbs, max_workers=9) as fanout,
        MultiIndexRetriever(kbs, max_workers=1) as sequential,
    ):
        for round_ in range(-WARMUP, rounds):
            subs = [queries[name][round_ % len(queries[name])] for name in BASES]
            singles = [seconds(kb.search, q, top_k=top_k) for q in subs for kb in kbs.values()]
            together = seconds(fanout.search, subs, top_k=top_k)
            looped = seconds(sequential.search, subs, top_k=top_k)
            if round_ >= 0:
                times["slowest"].append(max(singles))
                times["sum"].append(sum(singles))
                times["fanout"].append(together)
                times["sequential"].append(looped)
    return times


def summarize(setting: str, times: dict[str, list[float]]) -> dict[str, Any]:
    slowest = ms(times["slowest"], 50)
    summary: dict[str, Any] = {
        "setting": setting,
        "rounds": len(times["fanout"]),
        **{f"{key}_ms": {"p50": ms(v, 50), "p95": ms(v, 95)} for key, v in times.items()},
        "fanout_over_slowest": ms(times["fanout"], 50) / slowest,
        "fanout_over_slowest_per_round_median": statistics.median(
            f / s for f, s in zip(times["fanout"], times["slowest"])
        ),
        "sequential_over_slowest": ms(times["sequential"], 50) / slowest,
        "speedup_over_sequential": ms(times["sequential"], 50) / ms(times["fanout"], 50),
    }
    summary["meets_target"] = summary["fanout_over_slowest"] <= TARGET
    return summary


@contextmanager
def local_bases(
    datasets: dict[str, BeirDataset], cache: Path, embedding: str
) -> Iterator[dict[str, KnowledgeBase]]:
    # open_eval_kb reopens a cached entry with the default embedding (RAGSPINE_EMBEDDING, else
    # auto), which would embed a lexical entry on open: pin the default to what is asked for
    os.environ["RAGSPINE_EMBEDDING"] = embedding
    kbs = {name: open_eval_kb(d, cache, None, embedding).kb for name, d in datasets.items()}
    try:
        yield kbs
    finally:
        for kb in kbs.values():
            kb.close()


class SlowEmbeddings:
    """An embedding service's answers (hashes of the text) after ``delay`` seconds."""

    def __init__(self, dimension: int = 64) -> None:
        self.delay = 0.0
        self.vectors = fake_embeddings(dimension)

    def __call__(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
        time.sleep(self.delay)
        return self.vectors(path, body, headers)


@contextmanager
def remote_bases(
    datasets: dict[str, BeirDataset], service: SlowEmbeddings
) -> Iterator[dict[str, KnowledgeBase]]:
    """Hybrid bases whose vectors come from ``service`` on 127.0.0.1 (built in a temporary
    folder; set ``service.delay`` after the build)."""
    with openai_server(service) as (url, _), tempfile.TemporaryDirectory() as root:
        kbs = {}
        for name, dataset in datasets.items():
            backend = OpenAIEmbeddingBackend(url, "fake", dimension=64, batch_size=256)
            kbs[name] = KnowledgeBase(Path(root) / name, embedding=backend)
            kbs[name].add_documents(
                Document(doc_id, document_text(d.title, d.text), d.title)
                for doc_id, d in dataset.corpus.items()
            )
        try:
            yield kbs
        finally:
            for kb in kbs.values():
                kb.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path("/tmp/evalcache"))
    parser.add_argument("--embedding", choices=("none", "auto"), default="none")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--wait-ms", type=float, nargs="*", default=[50.0])
    parser.add_argument("--remote-ms", type=float, nargs="*", default=[50.0, 200.0])
    parser.add_argument("--remote-rounds", type=int, default=30)
    parser.add_argument("--top-k", type=int, default=10)
    args = parser.parse_args()
    paths = {name: DATASETS / name for name in BASES}
    missing = [str(path) for path in paths.values() if not (path / "queries.jsonl").is_file()]
    if missing:
        print(f"datasets missing: {', '.join(missing)}; nothing to measure", file=sys.stderr)
        return 0
    datasets = {name: load_beir(path) for name, path in paths.items()}
    queries = {name: list(d.judged_queries().values()) for name, d in datasets.items()}
    local = "BM25" if args.embedding == "none" else "hybrid, local ONNX model"
    with local_bases(datasets, args.cache, args.embedding) as kbs:
        results = [summarize(f"local ({local})", measure(kbs, queries, args.rounds, args.top_k))]
        for wait in args.wait_ms:
            stores = {name: RemoteStore(kb, wait / 1000) for name, kb in kbs.items()}
            times = measure(stores, queries, args.remote_rounds, args.top_k)
            results.append(summarize(f"remote store ({local}, simulated {wait:g} ms)", times))
    if args.remote_ms:
        service = SlowEmbeddings()
        with remote_bases(datasets, service) as kbs:
            for delay in args.remote_ms:
                service.delay = delay / 1000
                times = measure(kbs, queries, args.remote_rounds, args.top_k)
                results.append(summarize(f"remote embedding ({delay:g} ms)", times))
    cpus = os.cpu_count()
    print_table(
        f"Fan-out, 3 sub-questions × 3 knowledge bases, top {args.top_k}, {cpus} CPUs "
        "(p50, ms; the decomposing LLM call is not included)",
        ["setting", "rounds", "slowest single", "sum of 9 singles", "fan-out (9 workers)",
         "sequential (1 worker)", "fan-out ÷ slowest", f"≤ {TARGET}×", "speed-up vs sequential"],
        [
            [r["setting"], r["rounds"], r["slowest_ms"]["p50"], r["sum_ms"]["p50"],
             r["fanout_ms"]["p50"], r["sequential_ms"]["p50"], r["fanout_over_slowest"],
             "yes" if r["meets_target"] else "no", r["speedup_over_sequential"]]
            for r in results
        ],
    )  # fmt: skip
    print(
        f"\nWith {cpus} CPUs at most {cpus} searches compute at once: the fan-out overlaps "
        "searches that wait (a remote model or store) fully, but CPU-bound searches only up to "
        "the core count (and pure-Python parts not at all, under the GIL), so there it cannot "
        "beat the sum of the singles divided by the cores."
    )
    payload = {"cpus": cpus, "target": TARGET, "top_k": args.top_k, "results": results}
    print(f"\nwrote {write_result('fanout', payload)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
