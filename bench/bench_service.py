"""The HTTP service: what it adds to a search, and how it holds up under concurrent load.

Run: ``python bench/bench_service.py [--dataset scifact] [--queries 300] [--clients 16]
[--seconds 30]``. The knowledge base is the dataset's default one from the eval cache (hybrid,
as ``ragspine eval --embedding auto`` builds it), served by a real ``ragspine serve`` process on
127.0.0.1 with API keys. Prints two tables and writes ``bench/results/<date>-service.json``:

1. overhead: the same queries through ``kb.search`` in this process and through
   ``POST /v1/kbs/{kb}/search`` (one keep-alive client), in alternating blocks of 50, p50 and
   p99 of each, and the ratio;
2. load: ``--clients`` concurrent clients for ``--seconds``, each sending searches and, one
   request in ten, a document (JSON ingest); errors, queries/s, p50 and p99.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from common import load_dataset, print_table, write_result

from ragspine.config import default_eval_cache
from ragspine.eval.runner import open_eval_kb
from ragspine.retrieval.vector.embedding_backends import auto_embedding_spec
from tests.serve.server import create_key, served


def percentiles(seconds: list[float]) -> dict[str, float]:
    ms = np.asarray(seconds) * 1000
    return {"p50": float(np.percentile(ms, 50)), "p99": float(np.percentile(ms, 99))}


def overhead(url: str, key: str, kb_name: str, kb: Any, queries: list[str]) -> dict[str, Any]:
    """In-process and HTTP latency for the same queries, in alternating blocks of 50 (so drift
    hits both; query by query, each path's leftover threads would slow the other's next call)."""
    local: list[float] = []
    remote: list[float] = []
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:

        def over_http(query: str) -> None:
            body = {"query": query, "top_k": 10}
            client.post(f"/v1/kbs/{kb_name}/search", json=body).raise_for_status()

        for query in queries[:20]:  # warm both paths
            kb.search(query, top_k=10)
            over_http(query)
        for start in range(0, len(queries), 50):
            block = queries[start : start + 50]
            for times, run in ((local, lambda q: kb.search(q, top_k=10)), (remote, over_http)):
                for query in block:
                    began = time.perf_counter()
                    run(query)
                    times.append(time.perf_counter() - began)
    inprocess, http = percentiles(local), percentiles(remote)
    return {
        "in_process_ms": inprocess,
        "http_ms": http,
        "ratio_p50": http["p50"] / inprocess["p50"],
    }


def load(
    url: str,
    reader: str,
    writer: str,
    kb_name: str,
    queries: list[str],
    clients: int,
    seconds: float,
) -> dict[str, Any]:
    latencies: list[float] = []
    errors: list[str] = []
    counts = {"search": 0, "ingest": 0}
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client(number: int) -> None:
        rng = random.Random(number)
        with (
            httpx.Client(
                base_url=url, headers={"Authorization": f"Bearer {reader}"}, timeout=60
            ) as searcher,
            httpx.Client(
                base_url=url, headers={"Authorization": f"Bearer {writer}"}, timeout=60
            ) as ingester,
        ):
            sent = 0
            while time.monotonic() < stop:
                sent += 1
                kind = "ingest" if sent % 10 == 0 else "search"
                start = time.perf_counter()
                try:
                    if kind == "ingest":
                        response = ingester.post(f"/v1/kbs/{kb_name}/documents", json={
                            "doc_id": f"load-{number}-{sent % 30}",
                            "text": f"Load test note {sent} from client {number}. "
                                    + rng.choice(queries)})  # fmt: skip
                    else:
                        body = {"query": rng.choice(queries), "top_k": 10}
                        response = searcher.post(f"/v1/kbs/{kb_name}/search", json=body)
                    ok = response.status_code == 200
                    problem = (
                        "" if ok else f"{kind}: HTTP {response.status_code} {response.text[:120]}"
                    )
                except httpx.HTTPError as exc:
                    problem = f"{kind}: {type(exc).__name__}: {exc}"
                elapsed = time.perf_counter() - start
                with lock:
                    counts[kind] += 1
                    if problem:
                        errors.append(problem)
                    elif kind == "search":
                        latencies.append(elapsed)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    return {
        "clients": clients,
        "seconds": wall,
        "searches": counts["search"],
        "ingests": counts["ingest"],
        "errors": len(errors),
        "first_errors": errors[:5],
        "search_qps": counts["search"] / wall,
        "search_ms": percentiles(latencies) if latencies else None,
    }


def _name_the_model(kb_dir: Path, spec: str) -> None:
    """Eval caches built before the eval runner recorded spec names say "custom"; a served
    knowledge base must name its model so the server can load it."""
    config_path = kb_dir / "kb.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    if config.get("embedding", {}).get("spec") == "custom":
        config["embedding"]["spec"] = spec
        config_path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="scifact")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--cache", type=Path, default=Path(default_eval_cache()))
    args = parser.parse_args()
    data = load_dataset(args.dataset)
    if data is None:
        return 0
    queries = list(data.judged_queries().values())[: args.queries]
    ekb = open_eval_kb(data, args.cache, None, "auto")
    source = ekb.kb.path
    ekb.kb.close()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        served_kb = root / args.dataset
        subprocess.run(["cp", "-a", str(source), str(served_kb)], check=True)  # writes go here
        _name_the_model(served_kb, auto_embedding_spec([d.text for d in data.corpus.values()]))
        reader = create_key(root, "--kb", args.dataset, "--read")
        writer = create_key(root, "--kb", args.dataset, "--read", "--write")
        os.environ.pop("RAGSPINE_RERANKER", None)
        from ragspine import KnowledgeBase

        with KnowledgeBase(served_kb, create=False) as kb, served(root) as url:
            cost = overhead(url, reader, args.dataset, kb, queries)
            stress = load(url, reader, writer, args.dataset, queries, args.clients, args.seconds)
    print_table(
        f"Service overhead ({args.dataset}, {len(queries)} queries, top-10, hybrid default)",
        ["path", "p50 ms", "p99 ms"],
        [["kb.search (in process)", cost["in_process_ms"]["p50"], cost["in_process_ms"]["p99"]],
         ["POST /v1/kbs/{kb}/search", cost["http_ms"]["p50"], cost["http_ms"]["p99"]],
         ["ratio (HTTP / in process)", cost["ratio_p50"], ""]],
    )  # fmt: skip
    search_ms = stress["search_ms"] or {"p50": float("nan"), "p99": float("nan")}
    print_table(
        f"Load: {stress['clients']} clients for {stress['seconds']:.0f} s, 1 request in 10 ingests",
        ["searches", "ingests", "errors", "search q/s", "search p50 ms", "search p99 ms"],
        [[stress["searches"], stress["ingests"], stress["errors"], stress["search_qps"],
          search_ms["p50"], search_ms["p99"]]],
    )  # fmt: skip
    path = write_result("service", {"dataset": args.dataset, "overhead": cost, "load": stress})
    print(f"\nwritten: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
