from __future__ import annotations

import gzip
import re
import shutil
from pathlib import Path

import pytest

from ragspine.eval.beir import DatasetError, load_beir
from tests.eval.conftest import write_dataset


def test_r93_loads_corpus_queries_and_graded_qrels(dataset: Path) -> None:
    ds = load_beir(dataset)
    assert ds.name == "tiny" and len(ds.corpus) == 5
    assert ds.corpus["d5"].metadata == {"year": 2020}
    assert ds.qrels["q1"] == {"d1": 2, "d5": 1}
    assert list(ds.judged_queries()) == ["q1", "q2", "q3"]  # q4 has no judgements
    assert ds.warnings == ()


def test_r93_gzipped_corpus(dataset: Path) -> None:
    data = (dataset / "corpus.jsonl").read_bytes()
    (dataset / "corpus.jsonl").unlink()
    with gzip.open(dataset / "corpus.jsonl.gz", "wb") as fh:
        fh.write(data)
    assert len(load_beir(dataset).corpus) == 5


def test_r93_unknown_ids_in_qrels_are_counted_and_warned(tmp_path: Path) -> None:
    root = write_dataset(tmp_path / "d", [("q1", "d1", 1), ("q1", "nope", 1), ("qx", "d2", 1)])
    ds = load_beir(root)
    assert ds.qrels == {"q1": {"d1": 1}}
    assert any("1 judged query" in w for w in ds.warnings)
    assert any("1 judgement(s) name documents missing" in w for w in ds.warnings)


def test_r6_malformed_json_line_names_file_and_line(dataset: Path) -> None:
    with open(dataset / "queries.jsonl", "a", encoding="utf-8") as fh:
        fh.write('{"_id": "q9", "text": broken}\n')
    with pytest.raises(DatasetError, match=r"queries\.jsonl:5: malformed JSON"):
        load_beir(dataset)


def test_r6_bad_qrels_score_names_the_line(dataset: Path) -> None:
    with open(dataset / "qrels" / "test.tsv", "a", encoding="utf-8") as fh:
        fh.write("q1\td2\tvery\n")
    with pytest.raises(DatasetError, match=r"test\.tsv:6: score 'very'"):
        load_beir(dataset)


@pytest.mark.parametrize("victim", ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"])
def test_r6_missing_files_are_named(dataset: Path, victim: str) -> None:
    (dataset / victim).unlink()
    with pytest.raises(DatasetError, match=re.escape(Path(victim).name.split(".")[0])):
        load_beir(dataset)


def test_r6_empty_or_unmatched_dataset_is_an_error(tmp_path: Path, dataset: Path) -> None:
    with pytest.raises(DatasetError, match="no such dataset"):
        load_beir(tmp_path / "absent")
    (dataset / "corpus.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"no judged query|empty"):
        load_beir(dataset)
    shutil.rmtree(dataset)
    root = write_dataset(dataset, [("q1", "zzz", 1)])
    with pytest.raises(DatasetError, match="no judged query"):
        load_beir(root)
