"""Reading a BEIR-format collection: corpus, queries and graded judgements."""

from __future__ import annotations

import csv
import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ragspine.errors import InvalidArgumentError


@dataclass(frozen=True)
class BeirDataset:
    name: str
    corpus: dict[str, tuple[str, str]]  # doc id -> (title, text)
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]  # query id -> doc id -> grade (> 0 relevant)

    def judged_queries(self) -> dict[str, str]:
        """Queries that have at least one relevant document, in id order."""
        return {
            q: self.queries[q]
            for q in sorted(self.qrels)
            if q in self.queries and any(g > 0 for g in self.qrels[q].values())
        }


def _open(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def _jsonl(path: Path) -> Iterator[dict[str, object]]:
    with _open(path) as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidArgumentError(f"{path}:{number}: malformed JSON: {exc.msg}") from exc
            if not isinstance(row, dict) or "_id" not in row:
                raise InvalidArgumentError(f"{path}:{number}: expected an object with '_id'")
            yield row


def load_beir(directory: str | Path, split: str = "test") -> BeirDataset:
    root = Path(directory)
    corpus_path = next(
        (p for p in (root / "corpus.jsonl", root / "corpus.jsonl.gz") if p.is_file()), None
    )
    if corpus_path is None:
        raise InvalidArgumentError(f"{root}: no corpus.jsonl or corpus.jsonl.gz")
    corpus = {
        str(r["_id"]): (str(r.get("title") or ""), str(r.get("text") or ""))
        for r in _jsonl(corpus_path)
    }
    queries = {str(r["_id"]): str(r.get("text") or "") for r in _jsonl(root / "queries.jsonl")}
    qrels: dict[str, dict[str, int]] = {}
    qrels_path = root / "qrels" / f"{split}.tsv"
    with open(qrels_path, encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh, delimiter="\t")
        next(reader, None)
        for number, row in enumerate(reader, start=2):
            if not row:
                continue
            if len(row) < 3:
                raise InvalidArgumentError(f"{qrels_path}:{number}: expected 3 columns")
            query_id, doc_id, grade = row[0], row[1], row[2]
            try:
                qrels.setdefault(query_id, {})[doc_id] = int(float(grade))
            except ValueError as exc:
                raise InvalidArgumentError(f"{qrels_path}:{number}: bad score {grade!r}") from exc
    return BeirDataset(root.name, corpus, queries, qrels)
