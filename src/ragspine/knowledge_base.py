"""``KnowledgeBase``: one directory holding the chunk store and its indexes (R100).

The SQLite store is the record; the BM25 index is derived from it, saved beside it and tagged with
the store generation it reflects. Every search first catches the index up with the store, so a
retired or replaced chunk is never returned (R12), whichever process wrote it.
"""

from __future__ import annotations

import fcntl
import json
import logging
import shutil
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from ragspine.config import DENSE_MODES, LEXICAL_MODES, MODES, Settings, embedding_settings
from ragspine.documents.walk import iter_files
from ragspine.errors import InvalidArgumentError, KnowledgeBaseError, RagspineError
from ragspine.ingest import (
    ChunkingPlan,
    Document,
    IngestReport,
    PreparedDocument,
    file_hash,
    prepare_document,
    prepare_file,
)
from ragspine.retrieval.chunking.chunk_store import ChunkStore, DocumentRecord, SourceDocument
from ragspine.retrieval.chunking.chunking import Chunk, validate_budget
from ragspine.retrieval.filters import MetadataFilter, parse_filters
from ragspine.retrieval.hybrid import RERANK_DEPTH, HybridRetriever, Ranking, empty_ranking
from ragspine.retrieval.lexical.index import BM25Index
from ragspine.retrieval.lexical.tokenizer import Tokenizer
from ragspine.retrieval.link.snippet import ResultList, Snippet
from ragspine.retrieval.rerank.base import RerankChain, Reranker
from ragspine.retrieval.rerank.cross_encoder import make_reranker
from ragspine.retrieval.vector.embedding_backends import (
    EmbeddingBackend,
    EmbeddingError,
    auto_embedding_spec,
    make_embedding_backend,
    tokenizer_version,
)
from ragspine.retrieval.vector.index import VectorIndex

KB_FORMAT = 1
_ALWAYS = 2**62  # "complete for every generation": no mask to go stale
# A filtered search ranks again (up to this many times in all) when a concurrent writer's rows
# reached the index after its mask was made, so a rewrite never hides a document (R12).
_CONSISTENT_ATTEMPTS = 3
NO_EMBEDDING = "none"
NO_EMBEDDING_RECORD = {"spec": NO_EMBEDDING, "model_id": None, "dimension": 0, "tokenizer": None}
CONFIG_FILE = "kb.json"
STORE_FILE = "chunks.db"
LEXICAL_DIR = "lexical"
VECTOR_DIR = "vectors"
_WRITE_BATCH = 256

Progress = Callable[[int, int, str], None]
log = logging.getLogger(__name__)


def _saved_generation(directory: Path) -> int:
    """The store generation a saved index (lexical or vector) reflects, read from its
    ``meta.json`` without loading it; -1 if there is none."""
    try:
        return int(json.loads((directory / "meta.json").read_text(encoding="utf-8"))["generation"])
    except (OSError, ValueError, KeyError, TypeError):
        return -1


def _row_mask(rows: Sequence[int]) -> np.ndarray:
    mask = np.zeros((max(rows) + 1) if rows else 0, dtype=bool)
    mask[list(rows)] = True
    return mask


def _check_top_k(top_k: object) -> None:
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k <= 0:
        raise InvalidArgumentError(f"top_k must be a positive integer, got {top_k!r}")


def is_knowledge_base(path: str | Path) -> bool:
    return (Path(path) / CONFIG_FILE).is_file()


class KnowledgeBase:
    """Create or open the knowledge base in ``path``.

    Settings not given as keywords come from ``RAGSPINE_*`` variables when the knowledge base is
    created, and from its ``kb.json`` afterwards; a keyword that contradicts ``kb.json`` is an
    error rather than a silently inconsistent index.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        create: bool = True,
        chunk_chars: int | None = None,
        overlap_chars: int | None = None,
        stemmer: str | None = None,
        bm25_k1: float | None = None,
        bm25_b: float | None = None,
        retrieval_mode: str | None = None,
        embedding: str | EmbeddingBackend | None = None,
        fusion: str | None = None,
        reranker: str | Reranker | None = None,
    ) -> None:
        self.path = Path(path)
        requested = {
            "chunk_chars": chunk_chars,
            "overlap_chars": overlap_chars,
            "stemmer": stemmer,
            "bm25_k1": bm25_k1,
            "bm25_b": bm25_b,
        }
        config_path = self.path / CONFIG_FILE
        if config_path.is_file():
            self.config = self._read_config(config_path)
            recorded = self._recorded_settings(self.config)
            clash = {k: v for k, v in requested.items() if v is not None and v != recorded[k]}
            if clash:
                raise KnowledgeBaseError(
                    f"{self.path} was created with "
                    + ", ".join(f"{k}={recorded[k]!r}" for k in clash)
                    + "; it cannot be opened with "
                    + ", ".join(f"{k}={v!r}" for k, v in clash.items())
                )
            self.settings = Settings.from_env(
                {**recorded, "retrieval_mode": retrieval_mode, "fusion": fusion}
            )
        else:
            if not create:
                raise KnowledgeBaseError(f"{self.path} is not a knowledge base (no {CONFIG_FILE})")
            if self.path.exists() and any(self.path.iterdir()):
                raise KnowledgeBaseError(
                    f"{self.path} exists and is not empty; refusing to make it a knowledge base"
                )
            self.settings = Settings.from_env(
                {**requested, "retrieval_mode": retrieval_mode, "fusion": fusion}
            )
            self.config = self._initial_config(self.settings)
        self.plan = ChunkingPlan(self.settings.chunk_chars, self.settings.overlap_chars)
        self.tokenizer = Tokenizer(stemmer=self.settings.stemmer)
        creating, existed = not config_path.is_file(), self.path.exists()
        try:
            self._open(embedding, reranker)
        except BaseException:
            if creating:  # a knowledge base that could not be made leaves nothing behind (R6)
                self._discard_new(existed)
            raise

    def _open(
        self, embedding: str | EmbeddingBackend | None, reranker: str | Reranker | None
    ) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        if not (self.path / CONFIG_FILE).is_file():
            (self.path / CONFIG_FILE).write_text(
                json.dumps(self.config, indent=2) + "\n", encoding="utf-8"
            )
        self.store = ChunkStore(self.path / STORE_FILE)
        self.store.init_schema()
        self._auto_pending = False
        self.embedding = self._resolve_embedding(embedding)
        self._index_lock = threading.Lock()
        self._groups_cache: tuple[int, np.ndarray, list[str]] | None = None
        self._open_cache: tuple[int, np.ndarray] | None = None
        self._index = self._open_index()
        self._vectors = self._open_vectors()
        self._retriever = HybridRetriever(self._index, self._vectors, fusion=self.settings.fusion)
        self._rerankers: dict[str, RerankChain | None] = {}
        self._reranker = make_reranker() if reranker is None else self._reranker_for(reranker)
        behind = self._vectors is not None and self._vectors.generation < self.store.generation
        if (self._index.generation == 0 or behind) and self.store.generation > 1:
            with self._write_lock():  # absent or damaged: rebuild from the store, once, on disk
                self._sync_index(persist=True)

    def _discard_new(self, existed: bool) -> None:
        store = getattr(self, "store", None)
        if store is not None:
            store.close()
        if not existed:
            shutil.rmtree(self.path, ignore_errors=True)
            return
        for child in self.path.iterdir():  # the caller's empty folder stays, empty
            if child.is_dir():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)

    # ------------------------------------------------------------- configuration
    @staticmethod
    def _read_config(path: Path) -> dict[str, Any]:
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise KnowledgeBaseError(f"{path} is unreadable: {exc}") from exc
        if not isinstance(config, dict) or config.get("format") != KB_FORMAT:
            raise KnowledgeBaseError(
                f"{path} is not a ragspine knowledge base of format {KB_FORMAT}"
            )
        return config

    @staticmethod
    def _initial_config(settings: Settings) -> dict[str, Any]:
        tokenizer = Tokenizer(stemmer=settings.stemmer)
        plan = ChunkingPlan(settings.chunk_chars, settings.overlap_chars)
        try:
            validate_budget(plan.max_chars, plan.overlap_chars)
        except ValueError as exc:
            raise InvalidArgumentError(str(exc)) from exc
        return {
            "format": KB_FORMAT,
            "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "chunker": plan.describe(),
            "tokenizer": tokenizer.describe(),
            "bm25": {"k1": settings.bm25_k1, "b": settings.bm25_b},
        }

    @staticmethod
    def _recorded_settings(config: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "chunk_chars": int(config["chunker"]["max_chars"]),
            "overlap_chars": int(config["chunker"]["overlap_chars"]),
            "stemmer": str(config["tokenizer"]["stemmer"]),
            "bm25_k1": float(config["bm25"]["k1"]),
            "bm25_b": float(config["bm25"]["b"]),
        }

    def _resolve_embedding(
        self, embedding: str | EmbeddingBackend | None
    ) -> EmbeddingBackend | None:
        """The knowledge base's embedding model: recorded in kb.json once chosen (R23).

        ``auto`` (the default: zero configuration is hybrid) picks per knowledge base from its
        text: the multilingual model when it holds Chinese (or other CJK) text, the English one
        otherwise; without the ``[embed-onnx]`` extra it means no vector channel. An empty
        knowledge base decides at its first write; ``none`` keeps it lexical.
        """
        recorded = self.config.get("embedding")
        if embedding is None or isinstance(embedding, str):
            spec = embedding or (
                recorded["spec"] if recorded else embedding_settings().get("backend", "auto")
            )
            if recorded and recorded["spec"] == NO_EMBEDDING and spec != NO_EMBEDDING:
                recorded = None  # a lexical knowledge base asked, by name, for a model: adopt it
            if spec == "custom":
                model = recorded["model_id"] if recorded else "?"
                raise KnowledgeBaseError(
                    f"{self.path} uses the custom embedding model {model!r}; pass it as embedding="
                )
            asked = spec
            if spec == "auto" and not recorded:
                texts = [c.text for c in self.store.iter_chunks()[:2000]]
                if not texts:
                    self._auto_pending = auto_embedding_spec([]) != "none"
                    return None
                spec = auto_embedding_spec(texts)
            backend = make_embedding_backend(spec)
        else:
            spec = asked = "custom"
            backend = embedding
            if recorded and recorded["spec"] == NO_EMBEDDING:
                recorded = None
        if backend is None:
            if asked == NO_EMBEDDING and not recorded:  # stays lexical, whatever the default
                self._record(NO_EMBEDDING_RECORD)
            return None
        if recorded and (recorded["model_id"], recorded["dimension"]) != (
            backend.model_id,
            backend.dimension,
        ):
            raise KnowledgeBaseError(
                f"{self.path} holds vectors of {recorded['model_id']!r} "
                f"({recorded['dimension']} dimensions); it cannot be searched with "
                f"{backend.model_id!r} ({backend.dimension} dimensions)"
            )
        tokenizer = tokenizer_version(backend)
        if recorded and recorded.get("tokenizer") not in (None, tokenizer):
            raise KnowledgeBaseError(
                f"{self.path} holds vectors of {recorded['model_id']!r} made with tokenizer "
                f"{recorded['tokenizer']!r}; this installation's is {tokenizer!r} "
                "(re-ingest into a new knowledge base, or install the recorded version)"
            )
        if not recorded:
            self._record_embedding(spec, backend)
        return backend

    def _record_embedding(self, spec: str, backend: EmbeddingBackend) -> None:
        self._record(
            {
                "spec": spec,
                "model_id": backend.model_id,
                "dimension": backend.dimension,
                "tokenizer": tokenizer_version(backend),
            }
        )

    def _record(self, embedding: dict[str, Any]) -> None:
        self.config["embedding"] = embedding
        (self.path / CONFIG_FILE).write_text(
            json.dumps(self.config, indent=2) + "\n", encoding="utf-8"
        )

    def _settle_auto_embedding(self, texts: Sequence[str]) -> None:
        """First write to an ``auto`` knowledge base: choose the model from what arrives."""
        if not texts:
            return
        self._auto_pending = False
        spec = auto_embedding_spec(texts[:2000])
        backend = make_embedding_backend(spec)
        if backend is None:
            return
        self._record_embedding(spec, backend)
        self.embedding = backend
        self._vectors = self._retriever.vectors = self._new_vectors(backend)

    # ------------------------------------------------------------------- index
    def _new_index(self) -> BM25Index:
        return BM25Index(self.tokenizer, k1=self.settings.bm25_k1, b=self.settings.bm25_b)

    def _open_index(self) -> BM25Index:
        try:
            return BM25Index.load(self.path / LEXICAL_DIR, self.tokenizer)
        except ValueError:
            return self._new_index()  # absent or damaged: rebuilt from the store on first sync

    def _new_vectors(self, backend: EmbeddingBackend) -> VectorIndex:
        return VectorIndex(backend, search=self.settings.vector_search)

    def _open_vectors(self) -> VectorIndex | None:
        if self.embedding is None:
            return None
        try:
            return VectorIndex.load(
                self.path / VECTOR_DIR, self.embedding, search=self.settings.vector_search
            )
        except ValueError:
            return self._new_vectors(self.embedding)  # absent or damaged: rebuilt

    def _sync_index(self, *, persist: bool = False, progress: Progress | None = None) -> str | None:
        """Catch both channels up with the store; ``persist`` saves them (writers only).

        Returns why the vector channel could not catch up (the model failed), else ``None``;
        the lexical channel always catches up.
        """
        with self._index_lock:
            index = self._index
            store_generation = self.store.generation
            if index.generation > store_generation:
                index = self._new_index()  # the store was replaced underneath us
            if index.generation < store_generation:
                if (
                    index.generation
                    < _saved_generation(self.path / LEXICAL_DIR)
                    <= store_generation
                ):
                    index = self._open_index()  # another process saved a newer index
                changes = self.store.changes_since(index.generation)
                index.apply(changes.added, changes.retired, changes.generation)
            self._index = self._retriever.lexical = index
            if persist:
                index.save(self.path / LEXICAL_DIR)
            return self._sync_vectors(store_generation, persist, progress)

    def _sync_vectors(
        self, store_generation: int, persist: bool, progress: Progress | None
    ) -> str | None:
        vectors = self._vectors
        if vectors is None or vectors.generation == store_generation:
            return None
        if vectors.generation > store_generation:
            vectors = self._new_vectors(vectors.backend)
        elif vectors.generation < _saved_generation(self.path / VECTOR_DIR) <= store_generation:
            vectors = self._open_vectors() or vectors  # another process embedded these already
        changes = self.store.changes_since(vectors.generation)
        try:
            vectors.apply(
                changes,
                None if progress is None else lambda done, total: progress(done, total, "embed"),
            )
        except EmbeddingError as exc:
            log.warning("vector channel is behind the store: %s", exc)
            return str(exc)
        finally:
            self._vectors = self._retriever.vectors = vectors
        if persist:
            vectors.save(self.path / VECTOR_DIR)
        return None

    @contextmanager
    def _write_lock(self) -> Iterator[None]:
        with open(self.path / "write.lock", "a+b") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    # ------------------------------------------------------------------ writing
    def _write(
        self,
        prepared: Iterable[PreparedDocument | None],
        report: IngestReport,
        progress: Progress | None = None,
        total: int = 0,
    ) -> None:
        """Write in batches, one transaction (and one store generation) per batch."""
        pending: dict[str, PreparedDocument] = {}
        done = 0

        def flush() -> None:
            known = self.store.content_hashes(list(pending))
            batch: list[tuple[str, Sequence[Chunk], str, SourceDocument | None]] = []
            if self._auto_pending:
                self._settle_auto_embedding([c.text for p in pending.values() for c in p.chunks])
            for doc_id, item in pending.items():
                if known.get(doc_id) == item.source.content_hash:
                    report.unchanged += 1
                    continue
                if doc_id in known:
                    report.updated += 1
                else:
                    report.added += 1
                batch.append((doc_id, item.chunks, "", item.source))
            report.chunks_written += self.store.replace_many(batch)
            pending.clear()
            if progress is not None:
                progress(done, total, "writing")

        for item in prepared:
            done += 1
            if item is None:
                continue
            if item.source.doc_id in pending:
                flush()  # the same id twice: the later one becomes the newer version
            pending[item.source.doc_id] = item
            if len(pending) >= _WRITE_BATCH:
                flush()
        if pending:
            flush()

    def ingest(
        self,
        paths: str | Path | Sequence[str | Path],
        metadata: Mapping[str, Any] | None = None,
        *,
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        progress: Progress | None = None,
    ) -> IngestReport:
        """Load, chunk and index files; unchanged files are skipped by content hash.

        A file that cannot be read is reported in ``failed`` and the rest are still ingested.
        """
        if isinstance(paths, (str, Path)):
            paths = [paths]
        caller = dict(metadata or {})
        files = iter_files(paths, include=include, exclude=exclude)
        report = IngestReport()
        with self._write_lock():
            known = self.store.content_hashes([f.doc_id for f in files])

            def prepared() -> Iterator[PreparedDocument | None]:
                for done, item in enumerate(files, start=1):
                    if progress is not None:
                        progress(done, len(files), str(item.path))
                    try:
                        data = item.path.read_bytes()
                        digest = file_hash(item, data, caller, self.plan)
                        if known.get(item.doc_id) == digest:
                            report.unchanged += 1
                            yield None
                            continue
                        yield prepare_file(item, digest, caller, self.plan)
                    except OSError as exc:
                        report.failed.append((str(item.path), f"cannot read file: {exc}"))
                    except RagspineError as exc:
                        report.failed.append((str(item.path), str(exc)))

            self._write(prepared(), report)
            report.vector_error = self._sync_index(persist=True, progress=progress)
        return report

    def add_documents(
        self, documents: Iterable[Document], *, progress: Progress | None = None
    ) -> IngestReport:
        """Chunk and index documents already in memory, in batches.

        Every document is checked and chunked before the first write, so a bad one raises
        :class:`InvalidArgumentError` with nothing written (R6).
        """
        prepared = [prepare_document(d, self.plan) for d in documents]
        report = IngestReport()
        with self._write_lock():
            self._write(prepared, report, progress, len(prepared))
            if progress is not None:
                progress(len(prepared), len(prepared), "indexing")
            report.vector_error = self._sync_index(persist=True, progress=progress)
        return report

    def delete_document(self, doc_id: str) -> int:
        """Retire a document (R12); returns how many chunks left the active set."""
        with self._write_lock():
            retired = self.store.retire_document(doc_id)
            self._sync_index(persist=True)
        return retired

    # ------------------------------------------------------------------ reading
    def _channels(self, mode: str | None) -> tuple[str, ...]:
        """Which channels a mode runs (R26); lexical modes never touch the embedding model."""
        resolved = self.settings.retrieval_mode if mode is None else mode
        if resolved in LEXICAL_MODES:
            return ("bm25",)
        if resolved == "auto":
            return ("bm25",) if self._vectors is None else ("bm25", "vector")
        if resolved in DENSE_MODES:
            if self._vectors is None:
                raise InvalidArgumentError(
                    f"mode {resolved!r} needs an embedding backend, and none is configured; "
                    f"open the knowledge base with embedding=... or use one of auto, "
                    f"{', '.join(LEXICAL_MODES)}"
                )
            return ("vector",) if resolved == "vector" else ("bm25", "vector")
        raise InvalidArgumentError(f"unknown mode {resolved!r}; use one of {', '.join(MODES)}")

    def _allowed_mask(
        self, spec: MetadataFilter, doc_ids: Sequence[str] | None, include_restricted: bool
    ) -> tuple[np.ndarray | None, int]:
        """Slots that pass the filters, scope and clearance, resolved by the store before any
        scoring, and the generation the mask is complete for (every row written by then)."""
        if not spec.conditions and doc_ids is None:
            return (None, _ALWAYS) if include_restricted else self._open_mask()
        where, params = spec.to_sql()
        complete_through = self.store.generation
        rows = self.store.matching_row_ids(
            where, params, doc_ids, include_restricted=include_restricted
        )
        return _row_mask(rows), complete_through

    def _open_mask(self) -> tuple[np.ndarray, int]:
        """The slots of every chunk that is not RESTRICTED, cached per store generation (the
        link asks for it on every query)."""
        generation = self.store.generation
        cached = self._open_cache
        if cached is None or cached[0] != generation:
            mask = _row_mask(self.store.matching_row_ids(include_restricted=False))
            mask.setflags(write=False)  # shared between queries
            self._open_cache = cached = (generation, mask)
        return cached[1], cached[0]

    def retrieve(
        self,
        query: str,
        *,
        top_k: int = 10,
        filters: Mapping[str, Any] | MetadataFilter | None = None,
        doc_ids: Sequence[str] | None = None,
        mode: str | None = None,
        per_document: bool = False,
        include_restricted: bool = True,
    ) -> Ranking:
        """The ranking :meth:`search` returns, as chunk ids and scores only (no row fetch).

        For callers that need deep lists cheaply, such as evaluation. ``per_document`` keeps
        each document's best chunk only and returns ``top_k`` documents (``doc_ids`` filled).
        ``include_restricted=False`` is for callers without clearance: RESTRICTED chunks are
        left out before any scoring (R1).
        """
        if not isinstance(query, str):
            raise InvalidArgumentError(f"query must be a string, got {type(query).__name__}")
        _check_top_k(top_k)
        if doc_ids is not None and (
            isinstance(doc_ids, str) or not all(isinstance(d, str) for d in doc_ids)
        ):
            raise InvalidArgumentError(f"doc_ids must be a list of document ids, got {doc_ids!r}")
        channels = self._channels(mode)
        spec = parse_filters(filters)
        for _ in range(_CONSISTENT_ATTEMPTS):
            first_generation = self.store.generation
            lagging = self._sync_index()
            allowed, complete_through = self._allowed_mask(spec, doc_ids, include_restricted)
            if allowed is not None and not allowed.any():
                return empty_ranking()
            groups, names = self._document_groups() if per_document else (None, [])
            if lagging is not None and "vector" in channels:
                channels = ("bm25",)  # the model failed while catching up: degrade, visibly (R6)
            ranking = self._retriever.search(
                query, top_k, channels=channels, allowed=allowed, groups=groups
            )
            if self._index.generation <= complete_through:
                break  # else a writer's rows reached the index after the mask was made: again
        if groups is not None:
            ranking = replace(ranking, doc_ids=[names[g] for g in groups[ranking.slots].tolist()])
        if lagging is not None and ranking.degraded is None:
            ranking = replace(ranking, degraded=f"vector channel unavailable: {lagging}")
        # the index state that ranked lies between these generations (writers may have moved on)
        return replace(ranking, generations=(first_generation, self._index.generation))

    def _document_groups(self) -> tuple[np.ndarray, list[str]]:
        """Document number per store row (for per-document rankings), cached per generation."""
        generation = self.store.generation
        cached = self._groups_cache
        if cached is not None and cached[0] == generation:
            return cached[1], cached[2]
        rows = self.store.active_row_ids_by_document()
        names = sorted({doc_id for _, doc_id in rows})
        number = {doc_id: i for i, doc_id in enumerate(names)}
        groups = np.full(max((r for r, _ in rows), default=0) + 1, -1, dtype=np.int64)
        for row_id, doc_id in rows:
            groups[row_id] = number[doc_id]
        self._groups_cache = (generation, groups, names)
        return groups, names

    def search(
        self,
        query: str,
        *,
        top_k: int = 10,
        filters: Mapping[str, Any] | MetadataFilter | None = None,
        doc_ids: Sequence[str] | None = None,
        mode: str | None = None,
        rerank: str | Reranker | None = None,
        include_restricted: bool = True,
    ) -> ResultList[Snippet]:
        """Ranked snippets, best first; ties broken by chunk id (R3).

        ``filters`` and ``doc_ids`` only narrow (R4, R28): an empty ``doc_ids`` finds nothing.
        ``rerank`` (a spec for :func:`make_reranker` or a reranker; default the knowledge base's
        own, i.e. ``RAGSPINE_RERANKER``, off unless set) reorders the first
        ``max(top_k, RERANK_DEPTH)`` results. A stage that fell back says why in
        ``degraded_reasons`` (R6).
        """
        chain = self._reranker if rerank is None else self._reranker_for(rerank)
        _check_top_k(top_k)
        depth = top_k if chain is None else max(top_k, RERANK_DEPTH)
        ranking = self.retrieve(
            query,
            top_k=depth,
            filters=filters,
            doc_ids=doc_ids,
            mode=mode,
            include_restricted=include_restricted,
        )
        snippets = self.snippets(ranking)
        reasons = [] if ranking.degraded is None else [ranking.degraded]
        if chain is not None:
            outcome = chain.apply(query, snippets)
            snippets = outcome.results
            reasons.extend(outcome.degraded_reasons)
        return ResultList(snippets[:top_k], degraded_reasons=reasons)

    def snippets(self, ranking: Ranking) -> list[Snippet]:
        """The snippets of a ranking, in its order, as they were when it was ranked: a chunk a
        concurrent writer replaced since is still the version the ranking scored, so a search
        never returns a document half-written, or not at all, while it is rewritten (R12)."""
        if ranking.generations is None:
            chunks = self.store.fetch_active(ranking.slots)
        else:
            chunks = self.store.fetch_live(ranking.slots, *ranking.generations)
        return [
            Snippet.from_chunk(chunks[slot], ranking.scores_at(i))
            for i, slot in enumerate(ranking.slots)
            if slot in chunks
        ]

    def _reranker_for(self, rerank: str | Reranker) -> RerankChain | None:
        """The chain for a per-call reranker; specs are built once per knowledge base (models
        load once)."""
        if not isinstance(rerank, str):
            return rerank if isinstance(rerank, RerankChain) else RerankChain([rerank])
        with self._index_lock:
            if rerank not in self._rerankers:
                self._rerankers[rerank] = make_reranker(rerank)
            return self._rerankers[rerank]

    def documents(self) -> list[DocumentRecord]:
        return self.store.documents()

    def stats(self) -> dict[str, Any]:
        self._sync_index()
        index = self._index
        lexical = self.path / LEXICAL_DIR
        disk = sum(p.stat().st_size for p in lexical.iterdir()) if lexical.is_dir() else 0
        return {
            "path": str(self.path),
            **self.store.counts(),
            "generation": self.store.generation,
            "index": {
                "generation": index.generation,
                "segments": index.n_segments,
                "vocabulary": index.vocabulary_size,
                "memory_bytes": index.nbytes(),
                "disk_bytes": disk,
            },
            "vectors": None if self._vectors is None else self._vectors.describe(),
            "store_bytes": (self.path / STORE_FILE).stat().st_size,
            "settings": self.config,
        }

    # ---------------------------------------------------------------- lifecycle
    def close(self) -> None:
        self._retriever.close()
        self.store.close()

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def delete_knowledge_base(path: str | Path) -> None:
    """Remove a knowledge-base directory; refuses anything that is not one."""
    path = Path(path)
    if not is_knowledge_base(path):
        raise KnowledgeBaseError(f"{path} is not a knowledge base; nothing deleted")
    shutil.rmtree(path)
