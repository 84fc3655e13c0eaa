"""The versioned chunk store on SQLite: the record every index is derived from (R11–R13).

Explicit schema, parameterized SQL, WAL (readers never wait for the writer), one transaction per
write so a crash leaves the previous version active and nothing half-visible. Every write bumps a
store *generation*; rows remember the generation that created and retired them, so an index can
catch up on exactly what changed.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ragspine.errors import InvalidArgumentError
from ragspine.retrieval.chunking.chunking import Chunk
from ragspine.retrieval.sensitivity import is_restricted

SCHEMA_VERSION = 3
CHUNK_TABLE = "narrative_chunk"
DOCUMENT_TABLE = "narrative_document"

# name, SQL type + default. Order is the table's column order.
_CHUNK_COLUMNS: tuple[tuple[str, str], ...] = (
    ("chunk_id", "TEXT NOT NULL"),
    ("doc_id", "TEXT NOT NULL"),
    ("text", "TEXT NOT NULL"),
    ("char_start", "INTEGER NOT NULL DEFAULT 0"),
    ("char_end", "INTEGER NOT NULL DEFAULT 0"),
    ("ordinal", "INTEGER NOT NULL DEFAULT 0"),
    ("title", "TEXT NOT NULL DEFAULT ''"),
    ("source_path", "TEXT NOT NULL DEFAULT ''"),
    ("source_locator", "TEXT NOT NULL DEFAULT ''"),
    ("page", "INTEGER"),
    ("heading", "TEXT NOT NULL DEFAULT ''"),
    ("parent_id", "TEXT NOT NULL DEFAULT ''"),
    ("window_text", "TEXT NOT NULL DEFAULT ''"),
    ("parent_locator", "TEXT NOT NULL DEFAULT ''"),
    ("topic", "TEXT NOT NULL DEFAULT ''"),
    ("entity", "TEXT NOT NULL DEFAULT ''"),
    ("geography", "TEXT NOT NULL DEFAULT ''"),
    ("period", "TEXT NOT NULL DEFAULT ''"),
    ("language", "TEXT NOT NULL DEFAULT ''"),
    ("sensitivity", "TEXT NOT NULL DEFAULT 'PUBLIC'"),
    ("metadata", "TEXT NOT NULL DEFAULT '{}'"),
    ("valid_as_of", "TEXT NOT NULL DEFAULT ''"),
    ("ingested_at", "TEXT NOT NULL DEFAULT ''"),
    ("version", "INTEGER NOT NULL DEFAULT 1"),
    ("active", "INTEGER NOT NULL DEFAULT 1"),
    ("created_gen", "INTEGER NOT NULL DEFAULT 1"),
    ("retired_gen", "INTEGER"),
)
_CHUNK_FIELDS = tuple(name for name, _ in _CHUNK_COLUMNS[:21])  # the Chunk dataclass fields
_SELECT_CHUNK = ", ".join(
    ("row_id", *_CHUNK_FIELDS, "valid_as_of", "ingested_at", "version", "active")
)
DIMENSIONS = ("topic", "entity", "geography", "period", "language")


@dataclass(frozen=True)
class StoredChunk(Chunk):
    """A chunk as stored: the chunk plus its ingestion record."""

    valid_as_of: str = ""
    ingested_at: str = ""
    version: int = 1
    active: bool = True
    row_id: int = 0


@dataclass(frozen=True)
class SourceDocument:
    """The text a document's chunks cite, with the hash used to skip unchanged re-ingests."""

    doc_id: str
    text: str
    content_hash: str
    title: str = ""
    source_path: str = ""
    sensitivity: str = "PUBLIC"
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True)
class DocumentRecord:
    doc_id: str
    version: int
    content_hash: str
    title: str
    source_path: str
    sensitivity: str
    n_chunks: int


@dataclass(frozen=True)
class ChangeSet:
    """What changed after a generation: rows to add to an index and rows to drop from it."""

    generation: int
    added: list[tuple[int, str, str]]  # (row_id, chunk_id, text)
    retired: list[tuple[int, str]]  # (row_id, text)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _chunk_values(chunk: Chunk) -> tuple[Any, ...]:
    return tuple(
        json.dumps(chunk.metadata, sort_keys=True, ensure_ascii=False)
        if name == "metadata"
        else getattr(chunk, name)
        for name in _CHUNK_FIELDS
    )


class ChunkStore:
    """``ChunkStore(db_path)``; call :meth:`init_schema` (idempotent) before use."""

    def __init__(self, db_path: str | Path) -> None:
        self.db_path = Path(db_path)
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(
            self.db_path, timeout=30.0, isolation_level=None, check_same_thread=False
        )
        # the one definition of RESTRICTED (R1), so SQL excludes exactly what Python would
        self._conn.create_function(
            "is_restricted", 1, lambda label: int(is_restricted(label)), deterministic=True
        )
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self._reader: sqlite3.Connection | None = None

    def close(self) -> None:
        with self._lock:
            self._conn.close()
            if self._reader is not None:
                self._reader.close()
                self._reader = None

    def __enter__(self) -> ChunkStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    # ----------------------------------------------------------------- schema
    def init_schema(self) -> None:
        """Create or migrate the schema in place; running it again changes nothing."""
        with self._transaction() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
            )
            existing = [r[1] for r in conn.execute(f"PRAGMA table_info({CHUNK_TABLE})")]
            if existing and "row_id" not in existing:
                self._rebuild_chunk_table(conn, existing)
            elif not existing:
                conn.execute(self._create_chunk_table_sql(CHUNK_TABLE))
            else:
                for name, decl in _CHUNK_COLUMNS:
                    if name not in existing:
                        conn.execute(f"ALTER TABLE {CHUNK_TABLE} ADD COLUMN {name} {decl}")
            conn.execute(
                f"CREATE UNIQUE INDEX IF NOT EXISTS {CHUNK_TABLE}_id_version "
                f"ON {CHUNK_TABLE}(chunk_id, version)"
            )
            conn.execute(
                f"CREATE INDEX IF NOT EXISTS {CHUNK_TABLE}_doc ON {CHUNK_TABLE}(doc_id, active)"
            )
            conn.execute(
                f"CREATE INDEX IF NOT EXISTS {CHUNK_TABLE}_created ON {CHUNK_TABLE}(created_gen)"
            )
            conn.execute(
                f"CREATE INDEX IF NOT EXISTS {CHUNK_TABLE}_retired ON {CHUNK_TABLE}(retired_gen)"
            )
            conn.execute(
                f"""CREATE TABLE IF NOT EXISTS {DOCUMENT_TABLE} (
                    doc_id TEXT NOT NULL,
                    version INTEGER NOT NULL,
                    active INTEGER NOT NULL DEFAULT 1,
                    content_hash TEXT NOT NULL DEFAULT '',
                    title TEXT NOT NULL DEFAULT '',
                    source_path TEXT NOT NULL DEFAULT '',
                    sensitivity TEXT NOT NULL DEFAULT 'PUBLIC',
                    metadata TEXT NOT NULL DEFAULT '{{}}',
                    text TEXT NOT NULL DEFAULT '',
                    n_chunks INTEGER NOT NULL DEFAULT 0,
                    ingested_at TEXT NOT NULL DEFAULT '',
                    PRIMARY KEY (doc_id, version)
                )"""
            )
            conn.execute("INSERT OR IGNORE INTO store_meta(key, value) VALUES ('generation', '1')")
            conn.execute(
                "INSERT OR REPLACE INTO store_meta(key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )

    @staticmethod
    def _create_chunk_table_sql(name: str) -> str:
        columns = ",\n".join(f"{n} {decl}" for n, decl in _CHUNK_COLUMNS)
        return f"CREATE TABLE {name} (row_id INTEGER PRIMARY KEY AUTOINCREMENT,\n{columns})"

    def _rebuild_chunk_table(self, conn: sqlite3.Connection, existing: list[str]) -> None:
        """Older schemas lack the stable ``row_id`` that indexes address: copy into a new table."""
        conn.execute(self._create_chunk_table_sql(f"{CHUNK_TABLE}_new"))
        shared = [name for name, _ in _CHUNK_COLUMNS if name in existing]
        cols = ", ".join(shared)
        conn.execute(
            f"INSERT INTO {CHUNK_TABLE}_new ({cols}) "
            f"SELECT {cols} FROM {CHUNK_TABLE} ORDER BY rowid"
        )
        for index in [r[1] for r in conn.execute(f"PRAGMA index_list({CHUNK_TABLE})")]:
            if not index.startswith("sqlite_autoindex"):
                conn.execute(f'DROP INDEX IF EXISTS "{index}"')
        conn.execute(f"DROP TABLE {CHUNK_TABLE}")
        conn.execute(f"ALTER TABLE {CHUNK_TABLE}_new RENAME TO {CHUNK_TABLE}")

    # ---------------------------------------------------------------- writing
    @property
    def generation(self) -> int:
        with self._lock:
            row = self._conn.execute(
                "SELECT value FROM store_meta WHERE key = 'generation'"
            ).fetchone()
        return int(row[0]) if row else 0

    def replace_doc_chunks(
        self,
        doc_id: str,
        chunks: Sequence[Chunk],
        valid_as_of: str = "",
        *,
        source: SourceDocument | None = None,
    ) -> int:
        """New version = max(version) + 1; old rows inactive; returns rows written.

        Identical content writes nothing (0); an empty list retires the document.
        """
        return self.replace_many([(doc_id, chunks, valid_as_of, source)])

    def replace_many(
        self,
        items: Iterable[tuple[str, Sequence[Chunk], str, SourceDocument | None]],
    ) -> int:
        """Several :meth:`replace_doc_chunks` in one transaction (one generation)."""
        items = list(items)
        for doc_id, chunks, _, source in items:
            bad = [c.chunk_id for c in chunks if c.doc_id != doc_id]
            if bad:
                raise InvalidArgumentError(f"chunks {bad[:3]} do not belong to document {doc_id!r}")
            if len({c.chunk_id for c in chunks}) != len(chunks):
                raise InvalidArgumentError(f"document {doc_id!r} has duplicate chunk ids")
            if source is not None and source.doc_id != doc_id:
                raise InvalidArgumentError(f"source of {source.doc_id!r} given for {doc_id!r}")
        written = 0
        with self._transaction() as conn:
            generation = int(
                conn.execute("SELECT value FROM store_meta WHERE key = 'generation'").fetchone()[0]
            )
            new_generation = generation + 1
            changed = False
            now = _now()
            for doc_id, chunks, valid_as_of, source in items:
                rows = conn.execute(
                    f"SELECT {_SELECT_CHUNK} FROM {CHUNK_TABLE} WHERE doc_id = ? AND active = 1 "
                    "ORDER BY ordinal, chunk_id",
                    (doc_id,),
                ).fetchall()
                current = sorted(_chunk_values(_chunk_from_row(r)) for r in rows)
                if current == sorted(_chunk_values(c) for c in chunks) and (
                    source is None or self._source_unchanged(conn, source)
                ):
                    continue
                changed = True
                version = (
                    1
                    + conn.execute(
                        f"SELECT COALESCE(MAX(version), 0) FROM {CHUNK_TABLE} WHERE doc_id = ?",
                        (doc_id,),
                    ).fetchone()[0]
                )
                conn.execute(
                    f"UPDATE {CHUNK_TABLE} SET active = 0, retired_gen = ? "
                    "WHERE doc_id = ? AND active = 1",
                    (new_generation, doc_id),
                )
                conn.executemany(
                    f"INSERT INTO {CHUNK_TABLE} ({', '.join(_CHUNK_FIELDS)}, valid_as_of, "
                    "ingested_at, version, active, created_gen) VALUES "
                    f"({', '.join('?' * len(_CHUNK_FIELDS))}, ?, ?, ?, 1, ?)",
                    [
                        (*_chunk_values(c), valid_as_of, now, version, new_generation)
                        for c in chunks
                    ],
                )
                written += len(chunks)
                conn.execute(
                    f"UPDATE {DOCUMENT_TABLE} SET active = 0 WHERE doc_id = ? AND active = 1",
                    (doc_id,),
                )
                if chunks or source is not None:
                    self._insert_document(conn, doc_id, version, chunks, source, now)
            if changed:
                conn.execute(
                    "UPDATE store_meta SET value = ? WHERE key = 'generation'",
                    (str(new_generation),),
                )
        return written

    @staticmethod
    def _source_unchanged(conn: sqlite3.Connection, source: SourceDocument) -> bool:
        row = conn.execute(
            f"SELECT content_hash FROM {DOCUMENT_TABLE} WHERE doc_id = ? AND active = 1",
            (source.doc_id,),
        ).fetchone()
        return row is not None and row[0] == source.content_hash

    @staticmethod
    def _insert_document(
        conn: sqlite3.Connection,
        doc_id: str,
        version: int,
        chunks: Sequence[Chunk],
        source: SourceDocument | None,
        now: str,
    ) -> None:
        if not chunks:
            return  # a retired document keeps only its history
        first = chunks[0]
        conn.execute(
            f"INSERT OR REPLACE INTO {DOCUMENT_TABLE} (doc_id, version, active, content_hash, "
            "title, source_path, sensitivity, metadata, text, n_chunks, ingested_at) "
            "VALUES (?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                doc_id,
                version,
                source.content_hash if source else "",
                source.title if source else first.title,
                source.source_path if source else first.source_path,
                source.sensitivity if source else first.sensitivity,
                json.dumps(
                    (source.metadata if source else first.metadata) or {},
                    sort_keys=True,
                    ensure_ascii=False,
                ),
                source.text if source else "",
                len(chunks),
                now,
            ),
        )

    def retire_document(self, doc_id: str) -> int:
        """Take a document out of the active set; returns how many chunks were retired."""
        with self._lock:
            (count,) = self._conn.execute(
                f"SELECT COUNT(*) FROM {CHUNK_TABLE} WHERE doc_id = ? AND active = 1", (doc_id,)
            ).fetchone()
        self.replace_doc_chunks(doc_id, [])
        return int(count)

    # ---------------------------------------------------------------- reading
    def iter_chunks(
        self,
        *,
        doc_id: str | None = None,
        topic: str | None = None,
        entity: str | None = None,
        geography: str | None = None,
        period: str | None = None,
        language: str | None = None,
        include_inactive: bool = False,
    ) -> list[StoredChunk]:
        """AND-combined pre-filter on the controlled dimensions; active rows unless asked."""
        clauses: list[str] = []
        params: list[Any] = []
        wanted = {"doc_id": doc_id, "topic": topic, "entity": entity, "geography": geography}
        wanted |= {"period": period, "language": language}
        for name, value in wanted.items():
            if value is not None:
                clauses.append(f"{name} = ?")
                params.append(value)
        if not include_inactive:
            clauses.append("active = 1")
        where = " AND ".join(clauses) or "1"
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {_SELECT_CHUNK} FROM {CHUNK_TABLE} WHERE {where} "
                "ORDER BY doc_id, version, ordinal, chunk_id",
                params,
            ).fetchall()
        return [_chunk_from_row(r) for r in rows]

    def fetch_active(self, row_ids: Sequence[int]) -> dict[int, StoredChunk]:
        """Active chunks by row id; inactive or unknown ids are simply absent."""
        return self._fetch(row_ids, "active = 1", ())

    def fetch_live(
        self, row_ids: Sequence[int], first_generation: int, last_generation: int
    ) -> dict[int, StoredChunk]:
        """Chunks by row id that were live at some generation in ``[first, last]``: written by
        ``last`` and not retired by ``first`` (a snapshot read for an index state in between)."""
        return self._fetch(
            row_ids,
            "created_gen <= ? AND (retired_gen IS NULL OR retired_gen > ?)",
            (last_generation, first_generation),
        )

    def _fetch(
        self, row_ids: Sequence[int], condition: str, params: Sequence[Any]
    ) -> dict[int, StoredChunk]:
        found: dict[int, StoredChunk] = {}
        with self._lock:
            for start in range(0, len(row_ids), 500):
                batch = list(row_ids[start : start + 500])
                rows = self._conn.execute(
                    f"SELECT {_SELECT_CHUNK} FROM {CHUNK_TABLE} WHERE {condition} AND row_id IN "
                    f"({', '.join('?' * len(batch))})",
                    [*params, *batch],
                ).fetchall()
                found.update((r[0], _chunk_from_row(r)) for r in rows)
        return found

    def matching_row_ids(
        self,
        where_sql: str = "1",
        params: Sequence[Any] = (),
        doc_ids: Sequence[str] | None = None,
        *,
        include_restricted: bool = True,
    ) -> list[int]:
        """Row ids, of every version, matching a compiled filter and an optional document scope,
        RESTRICTED ones left out unless ``include_restricted``.

        Rows never change once written, so this set only grows: a mask built from it is valid
        for every later index state, whose live set says which versions count (R12).
        """
        sql = f"SELECT row_id FROM {CHUNK_TABLE} WHERE ({where_sql})"
        if not include_restricted:
            sql += " AND NOT is_restricted(sensitivity)"
        args = list(params)
        if doc_ids is not None:
            if not doc_ids:
                return []
            sql += f" AND doc_id IN ({', '.join('?' * len(doc_ids))})"
            args.extend(doc_ids)
        with self._lock:
            return [r[0] for r in self._conn.execute(sql, args)]

    def active_row_ids_by_document(self) -> list[tuple[int, str]]:
        """``(row_id, doc_id)`` of every active chunk."""
        with self._lock:
            rows = self._conn.execute(
                f"SELECT row_id, doc_id FROM {CHUNK_TABLE} WHERE active = 1"
            ).fetchall()
        return [(int(r), str(d)) for r, d in rows]

    def changes_since(self, generation: int) -> ChangeSet:
        """Rows created or retired after ``generation`` (for index catch-up)."""
        with self._lock:
            self._conn.execute("BEGIN")
            try:
                current = int(
                    self._conn.execute(
                        "SELECT value FROM store_meta WHERE key = 'generation'"
                    ).fetchone()[0]
                )
                # sorted here, not in SQL: ORDER BY row_id would make SQLite scan the table
                # instead of using the generation indexes
                added = self._conn.execute(
                    f"SELECT row_id, chunk_id, text FROM {CHUNK_TABLE} "
                    "WHERE created_gen > ? AND active = 1",
                    (generation,),
                ).fetchall()
                retired = self._conn.execute(
                    f"SELECT row_id, text FROM {CHUNK_TABLE} "
                    "WHERE retired_gen > ? AND created_gen <= ?",
                    (generation, generation),
                ).fetchall()
            finally:
                self._conn.execute("COMMIT")
        return ChangeSet(current, sorted(added), sorted(retired))

    def documents(self) -> list[DocumentRecord]:
        with self._lock:
            rows = self._conn.execute(
                f"SELECT doc_id, version, content_hash, title, source_path, sensitivity, n_chunks "
                f"FROM {DOCUMENT_TABLE} WHERE active = 1 ORDER BY doc_id"
            ).fetchall()
        return [DocumentRecord(*r) for r in rows]

    def content_hashes(self, doc_ids: Sequence[str]) -> dict[str, str]:
        """Hashes of the active versions of ``doc_ids`` (absent ids are left out)."""
        found: dict[str, str] = {}
        with self._lock:
            for start in range(0, len(doc_ids), 500):
                batch = list(doc_ids[start : start + 500])
                found.update(
                    self._conn.execute(
                        f"SELECT doc_id, content_hash FROM {DOCUMENT_TABLE} WHERE active = 1 "
                        f"AND doc_id IN ({', '.join('?' * len(batch))})",
                        batch,
                    ).fetchall()
                )
        return found

    def source_text(self, doc_id: str) -> str | None:
        with self._lock:
            row = self._conn.execute(
                f"SELECT text FROM {DOCUMENT_TABLE} WHERE doc_id = ? AND active = 1", (doc_id,)
            ).fetchone()
        return None if row is None else str(row[0])

    def counts(self) -> dict[str, int]:
        with self._lock:
            docs, chunks = self._conn.execute(
                f"SELECT COUNT(DISTINCT doc_id), COUNT(*) FROM {CHUNK_TABLE} WHERE active = 1"
            ).fetchone()
            total = self._conn.execute(f"SELECT COUNT(*) FROM {CHUNK_TABLE}").fetchone()[0]
        return {"documents": docs, "chunks": chunks, "rows": total}

    def execute_read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run a read-only query on a connection that SQLite itself keeps read-only."""
        with self._lock:
            if self._reader is None:
                self._reader = sqlite3.connect(
                    f"{self.db_path.resolve().as_uri()}?mode=ro",
                    uri=True,
                    check_same_thread=False,
                )
                self._reader.execute("PRAGMA query_only = ON")
            try:
                return list(self._reader.execute(sql, params).fetchall())
            except sqlite3.OperationalError as exc:
                if "readonly" in str(exc) or "read-only" in str(exc) or "query_only" in str(exc):
                    raise InvalidArgumentError(f"execute_read refuses writes: {exc}") from exc
                raise


def _chunk_from_row(row: Sequence[Any]) -> StoredChunk:
    values = dict(zip(("row_id", *_CHUNK_FIELDS), row[: 1 + len(_CHUNK_FIELDS)]))
    values["metadata"] = json.loads(values["metadata"] or "{}")
    valid_as_of, ingested_at, version, active = row[1 + len(_CHUNK_FIELDS) :]
    names = {f.name for f in fields(StoredChunk)}
    return StoredChunk(
        **{k: v for k, v in values.items() if k in names},
        valid_as_of=valid_as_of,
        ingested_at=ingested_at,
        version=version,
        active=bool(active),
    )
