from __future__ import annotations

import json
from pathlib import Path

import pytest

CORPUS = [
    {"_id": "d1", "title": "Solar", "text": "Solar panels convert sunlight into electricity."},
    {"_id": "d2", "title": "Wind turbines", "text": "Wind turbines turn wind into electric power."},
    {"_id": "d3", "title": "Coal", "text": "Coal plants burn coal and emit carbon dioxide."},
    {"_id": "d4", "title": "太阳能", "text": "太阳能电池把阳光变成电能。"},
    {"_id": "d5", "title": "Hydro", "text": "Dams use falling water to make electricity.",
     "metadata": {"year": 2020}},
]  # fmt: skip
QUERIES = [
    {"_id": "q1", "text": "how do solar panels make electricity"},
    {"_id": "q2", "text": "wind power"},
    {"_id": "q3", "text": "太阳能电池"},
    {"_id": "q4", "text": "an unjudged query"},
]
QRELS = [("q1", "d1", 2), ("q1", "d5", 1), ("q2", "d2", 1), ("q3", "d4", 1)]


def write_dataset(root: Path, qrels: list[tuple[str, str, int]] = QRELS) -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in CORPUS), encoding="utf-8"
    )
    (root / "queries.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in QUERIES), encoding="utf-8"
    )
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{g}" for q, d, g in qrels]
    (root / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@pytest.fixture()
def dataset(tmp_path: Path) -> Path:
    return write_dataset(tmp_path / "tiny")
