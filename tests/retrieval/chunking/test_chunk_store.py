from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragspine.errors import InvalidArgumentError
from ragspine.retrieval.chunking.build import build_chunks
from ragspine.retrieval.chunking.chunk_store import CHUNK_TABLE, ChunkStore
from ragspine.retrieval.chunking.chunking import Chunk


def chunks_for(doc_id: str, text: str, **meta: object) -> list[Chunk]:
    return build_chunks(doc_id, text, metadata=meta, max_chars=60, overlap_chars=0)


@pytest.fixture()
def store(tmp_path: Path) -> ChunkStore:
    s = ChunkStore(tmp_path / "chunks.db")
    s.init_schema()
    yield s
    s.close()


def test_r11_init_schema_is_idempotent(store: ChunkStore) -> None:
    store.replace_doc_chunks("d", chunks_for("d", "hello world"))
    store.init_schema()
    store.init_schema()
    assert len(store.iter_chunks()) == 1
    assert store.execute_read("PRAGMA journal_mode")[0][0] == "wal"


def test_r11_stored_chunk_carries_all_fields(store: ChunkStore) -> None:
    store.replace_doc_chunks("d", chunks_for("d", "hello world", entity="ACME"), valid_as_of="2024")
    (chunk,) = store.iter_chunks()
    assert (chunk.version, chunk.active, chunk.valid_as_of) == (1, True, "2024")
    assert chunk.entity == "ACME" and chunk.metadata == {"entity": "ACME"}
    assert chunk.ingested_at and chunk.parent_id == "" and chunk.window_text == ""


def test_r12_replace_bumps_version_and_retires_old_rows(store: ChunkStore) -> None:
    assert store.replace_doc_chunks("d", chunks_for("d", "version one")) == 1
    assert store.replace_doc_chunks("d", chunks_for("d", "version two.\n\nmore text")) == 1
    rows = store.iter_chunks(doc_id="d", include_inactive=True)
    assert [(c.version, c.active) for c in rows] == [(1, False), (2, True)]
    assert [c.text for c in store.iter_chunks(doc_id="d")] == ["version two.\n\nmore text"]


def test_r12_identical_reingest_writes_nothing(store: ChunkStore) -> None:
    store.replace_doc_chunks("d", chunks_for("d", "same text"))
    generation = store.generation
    assert store.replace_doc_chunks("d", chunks_for("d", "same text")) == 0
    assert store.generation == generation
    assert len(store.iter_chunks(include_inactive=True)) == 1


def test_r12_empty_list_retires_the_document(store: ChunkStore) -> None:
    store.replace_doc_chunks("d", chunks_for("d", "text"))
    store.replace_doc_chunks("e", chunks_for("e", "other"))
    assert store.replace_doc_chunks("d", []) == 0
    assert [c.doc_id for c in store.iter_chunks()] == ["e"]
    assert [d.doc_id for d in store.documents()] == ["e"]


def test_r12_changes_since_reports_added_and_retired(store: ChunkStore) -> None:
    store.replace_doc_chunks("d", chunks_for("d", "one"))
    g = store.generation
    store.replace_doc_chunks("d", chunks_for("d", "two"))
    changes = store.changes_since(g)
    assert [text for _, _, text in changes.added] == ["two"]
    assert [text for _, text in changes.retired] == ["one"]
    assert changes.generation == store.generation


def test_r12_foreign_chunks_are_rejected_without_writing(store: ChunkStore) -> None:
    with pytest.raises(InvalidArgumentError):
        store.replace_doc_chunks("d", chunks_for("other", "text"))
    assert store.iter_chunks(include_inactive=True) == []


def test_r13_iter_chunks_and_combines_filters(store: ChunkStore) -> None:
    store.replace_doc_chunks("a", chunks_for("a", "x", entity="ACME", period="2023", language="en"))
    store.replace_doc_chunks("b", chunks_for("b", "y", entity="ACME", period="2024", language="en"))
    store.replace_doc_chunks("c", chunks_for("c", "z", entity="Other", period="2023"))
    assert [c.doc_id for c in store.iter_chunks(entity="ACME")] == ["a", "b"]
    assert [c.doc_id for c in store.iter_chunks(entity="ACME", period="2023")] == ["a"]
    assert store.iter_chunks(entity="ACME", language="zh") == []
    store.replace_doc_chunks("a", [])
    assert [c.doc_id for c in store.iter_chunks(entity="ACME")] == ["b"]
    assert len(store.iter_chunks(entity="ACME", include_inactive=True)) == 2


def test_r11_execute_read_refuses_writes(store: ChunkStore) -> None:
    store.replace_doc_chunks("d", chunks_for("d", "text"))
    assert store.execute_read(f"SELECT COUNT(*) FROM {CHUNK_TABLE}") == [(1,)]
    for sql in (f"DELETE FROM {CHUNK_TABLE}", f"DROP TABLE {CHUNK_TABLE}", "CREATE TABLE t(x)"):
        with pytest.raises(InvalidArgumentError):
            store.execute_read(sql)
    assert len(store.iter_chunks()) == 1


def test_r11_older_schema_migrates_in_place(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    conn = sqlite3.connect(db)
    conn.execute(
        f"CREATE TABLE {CHUNK_TABLE} (chunk_id TEXT PRIMARY KEY, doc_id TEXT, text TEXT, "
        "title TEXT, source_locator TEXT, topic TEXT, entity TEXT, geography TEXT, period TEXT, "
        "language TEXT, sensitivity TEXT)"
    )
    conn.execute(
        f"INSERT INTO {CHUNK_TABLE} VALUES ('d#0','d','legacy text','T','d#0','','ACME','','',"
        "'en','PUBLIC')"
    )
    conn.commit()
    conn.close()
    store = ChunkStore(db)
    store.init_schema()
    store.init_schema()
    (chunk,) = store.iter_chunks()
    assert (chunk.text, chunk.entity, chunk.version, chunk.active) == (
        "legacy text",
        "ACME",
        1,
        True,
    )
    assert chunk.row_id == 1
    store.replace_doc_chunks("d", chunks_for("d", "new text"))
    rows = store.iter_chunks(doc_id="d", include_inactive=True)
    assert [(c.text, c.version, c.active) for c in rows] == [
        ("legacy text", 1, False),
        ("new text", 2, True),
    ]
    store.close()


def test_r11_reader_never_blocks_on_an_open_write(store: ChunkStore) -> None:
    store.replace_doc_chunks("d", chunks_for("d", "committed"))
    writer = sqlite3.connect(store.db_path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute(f"UPDATE {CHUNK_TABLE} SET text = 'uncommitted'")
    reader = sqlite3.connect(store.db_path, timeout=0)
    start = time.perf_counter()
    assert reader.execute(f"SELECT text FROM {CHUNK_TABLE}").fetchall() == [("committed",)]
    assert time.perf_counter() - start < 0.5
    writer.execute("ROLLBACK")
    writer.close()
    reader.close()


_WRITER = """
import sys
from ragspine.retrieval.chunking.build import build_chunks
from ragspine.retrieval.chunking.chunk_store import ChunkStore
store = ChunkStore(sys.argv[1]); store.init_schema()
n = 0
while True:
    n += 1
    text = "\\n\\n".join(f"round {n} paragraph {i} " + "x" * 40 for i in range(1 + n % 7))
    store.replace_doc_chunks("doc", build_chunks("doc", text, max_chars=60, overlap_chars=0))
    print(n, flush=True)
"""


@pytest.mark.slow
def test_r6_sigkill_mid_ingest_leaves_previous_version_whole(tmp_path: Path) -> None:
    rng = random.Random(7)
    db = tmp_path / "chunks.db"
    for _ in range(8):
        proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(db)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        proc.stdout.readline()  # at least one version committed
        time.sleep(rng.uniform(0.0, 0.3))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        store = ChunkStore(db)
        store.init_schema()
        active = store.iter_chunks(doc_id="doc")
        versions = {c.version for c in active}
        assert len(versions) == 1, versions
        n = int(active[0].text.split()[1])
        text = "\n\n".join(f"round {n} paragraph {i} " + "x" * 40 for i in range(1 + n % 7))
        assert [c.text for c in active] == [
            c.text for c in build_chunks("doc", text, max_chars=60, overlap_chars=0)
        ]
        store.close()
