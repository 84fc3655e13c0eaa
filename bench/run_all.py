"""The benchmark suite: every dataset under the shared datasets folder, every available mode,
plus bm25s and rank-bm25 on the same chunks and tokens.

Run: ``python bench/run_all.py`` (``--smoke`` for CI: one small dataset, 50 queries).
Writes ``<out>/<date>-<dataset>.json`` per dataset and ``<out>/SUMMARY.md``; the README's table
comes from SUMMARY.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from datetime import date
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DATASETS, RESULTS

from ragspine.eval.report import markdown_table
from ragspine.eval.runner import available_modes, run_eval

SMOKE_DATASET = "cisi"
SMOKE_QUERIES = 50


def datasets(names: list[str] | None) -> list[Path]:
    found = sorted(p for p in DATASETS.iterdir() if (p / "queries.jsonl").is_file())
    return [p for p in found if names is None or p.name in names]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--smoke", action="store_true", help=f"{SMOKE_DATASET}, {SMOKE_QUERIES} queries"
    )
    parser.add_argument("--datasets", nargs="*", default=None)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--cache", type=Path, default=None, help="knowledge-base cache folder")
    parser.add_argument("--embedding", default=None, help="also run vector and hybrid modes")
    args = parser.parse_args()
    if not DATASETS.is_dir():
        print(f"no datasets at {DATASETS}; nothing to measure", file=sys.stderr)
        return 0
    names = [SMOKE_DATASET] if args.smoke else args.datasets
    limit = SMOKE_QUERIES if args.smoke else None
    args.out.mkdir(parents=True, exist_ok=True)
    today = date.today().isoformat()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        cache = args.cache or Path(scratch)
        for path in datasets(names):
            print(f"{path.name} ...", file=sys.stderr, flush=True)
            results, dataset = run_eval(
                path, modes=available_modes(args.embedding), limit_queries=limit, cache_dir=cache,
                compare_peers=True, embedding=args.embedding,
            )  # fmt: skip
            for warning in dataset.warnings:
                print(f"warning: {path.name}: {warning}", file=sys.stderr)
            (args.out / f"{today}-{path.name}.json").write_text(
                json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
            )
            rows.extend(results)
    table = markdown_table(rows)
    command = "python bench/run_all.py" + (" --smoke" if args.smoke else "")
    command += f" --embedding {args.embedding}" if args.embedding else ""
    (args.out / "SUMMARY.md").write_text(
        f"# Benchmark summary ({today})\n\n`{command}`; latency is per document-level query "
        "(top-100 documents); peers index the same chunks with the same tokens. `index s` is "
        "ragspine's whole ingest, or a peer's index build; the index-build ratio compares "
        f"against ragspine's index rebuilt in the same run.\n\n{table}",
        encoding="utf-8",
    )
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
