"""Reading a BEIR-format collection: corpus, queries and graded judgements (R93).

Every problem with the files is reported with the file and line. Judgements that point at an
unknown document or query are counted, warned about and left out; the rest of the run goes on.
"""

from __future__ import annotations

import csv
import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ragspine.errors import InvalidArgumentError


class DatasetError(InvalidArgumentError):
    """The dataset folder or one of its files cannot be used; the message names file and line."""


@dataclass(frozen=True)
class CorpusDocument:
    title: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BeirDataset:
    name: str
    corpus: dict[str, CorpusDocument]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]  # query id -> doc id -> grade (> 0 relevant)
    warnings: tuple[str, ...] = ()

    def judged_queries(self) -> dict[str, str]:
        """The queries that have judgements, in id order: only these are evaluated."""
        return {q: self.queries[q] for q in sorted(self.qrels)}


def _open(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        with _open(path) as fh:
            for number, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DatasetError(f"{path}:{number}: malformed JSON: {exc.msg}") from exc
                if not isinstance(row, dict) or "_id" not in row:
                    raise DatasetError(f"{path}:{number}: expected a JSON object with an '_id'")
                yield number, row
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise DatasetError(f"{path}: cannot read: {exc}") from exc


def _corpus_file(root: Path) -> Path:
    for candidate in (root / "corpus.jsonl", root / "corpus.jsonl.gz"):
        if candidate.is_file():
            return candidate
    raise DatasetError(f"{root}: no corpus.jsonl or corpus.jsonl.gz")


def _read_corpus(path: Path) -> dict[str, CorpusDocument]:
    corpus: dict[str, CorpusDocument] = {}
    for number, row in _jsonl(path):
        metadata = row.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise DatasetError(f"{path}:{number}: 'metadata' must be an object")
        doc_id = str(row["_id"])
        if doc_id in corpus:
            raise DatasetError(f"{path}:{number}: duplicate document id {doc_id!r}")
        corpus[doc_id] = CorpusDocument(
            str(row.get("title") or ""), str(row.get("text") or ""), metadata
        )
    return corpus


def _read_qrels(path: Path) -> dict[str, dict[str, int]]:
    if not path.is_file():
        raise DatasetError(f"{path}: missing judgements file")
    qrels: dict[str, dict[str, int]] = {}
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh, delimiter="\t")
        header = next(reader, None)
        if header is None:
            raise DatasetError(f"{path}: empty file (expected a header line)")
        for number, row in enumerate(reader, start=2):
            if not row or not "".join(row).strip():
                continue
            if len(row) < 3:
                raise DatasetError(f"{path}:{number}: expected query-id, corpus-id, score")
            try:
                grade = int(float(row[2]))
            except ValueError as exc:
                raise DatasetError(f"{path}:{number}: score {row[2]!r} is not a number") from exc
            qrels.setdefault(row[0], {})[row[1]] = grade
    return qrels


def load_beir(directory: str | Path, split: str = "test") -> BeirDataset:
    root = Path(directory)
    if not root.is_dir():
        raise DatasetError(f"{root}: no such dataset folder")
    corpus = _read_corpus(_corpus_file(root))
    queries_path = root / "queries.jsonl"
    if not queries_path.is_file():
        raise DatasetError(f"{queries_path}: missing queries file")
    queries = {str(row["_id"]): str(row.get("text") or "") for _, row in _jsonl(queries_path)}
    raw_qrels = _read_qrels(root / "qrels" / f"{split}.tsv")
    qrels: dict[str, dict[str, int]] = {}
    unknown_queries = unknown_docs = 0
    for query_id, judged in raw_qrels.items():
        if query_id not in queries:
            unknown_queries += 1
            continue
        known = {d: g for d, g in judged.items() if d in corpus}
        unknown_docs += len(judged) - len(known)
        if known:
            qrels[query_id] = known
    warnings = []
    if unknown_queries:
        warnings.append(f"{unknown_queries} judged query id(s) are not in {queries_path.name}")
    if unknown_docs:
        warnings.append(f"{unknown_docs} judgement(s) name documents missing from the corpus")
    if not corpus:
        raise DatasetError(f"{root}: the corpus is empty")
    if not qrels:
        raise DatasetError(f"{root}: no judged query matches the corpus and queries")
    return BeirDataset(root.name, corpus, queries, qrels, tuple(warnings))
