"""The HTTP service (R91): every knowledge base under one root, behind per-key grants.

Errors are always ``{"error": {"code", "message"}}``. A knowledge base outside a key's grants is a
403 whether it exists or not, so a key learns nothing about bases it may not use. A key without
clearance never receives a RESTRICTED chunk — not from search, not from a document listing, not
from an error message (R1, the service's exit): its searches exclude them before scoring, and a
RESTRICTED document is "not found" to it.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile as StarletteUpload
from starlette.exceptions import HTTPException as StarletteHTTPException

from ragspine import __version__
from ragspine.errors import InvalidArgumentError, KnowledgeBaseError, RagspineError
from ragspine.ingest import Document
from ragspine.knowledge_base import KnowledgeBase, delete_knowledge_base, is_knowledge_base
from ragspine.retrieval.link.narrative_link import SearchIndex, search_with_retry, snippet_dict
from ragspine.retrieval.multi_index import MultiIndexRetriever
from ragspine.retrieval.sensitivity import is_restricted
from ragspine.serve.jobs import JobQueue
from ragspine.serve.keys import Access, KeyStore, is_kb_name

STATIC = Path(__file__).parent / "static"
UPLOADS = ".ragspine-uploads"
MAX_TOP_K = 1000


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


class CreateKnowledgeBase(BaseModel):
    name: str
    chunk_chars: int | None = Field(default=None, gt=0)
    overlap_chars: int | None = Field(default=None, ge=0)
    embedding: str | None = None
    stemmer: str | None = None


class DocumentIn(BaseModel):
    doc_id: str = Field(min_length=1)
    text: str
    title: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)
    sensitivity: str = "PUBLIC"


class SearchRequest(BaseModel):
    query: str
    top_k: int = Field(default=10, ge=1, le=MAX_TOP_K)
    filters: dict[str, Any] | None = None
    doc_ids: list[str] | None = None
    mode: str | None = None
    rerank: str | None = None
    retry_without_filters: bool = True


class MultiSearchRequest(SearchRequest):
    kbs: list[str] = Field(min_length=1, max_length=32)


class Service:
    """The open knowledge bases of one root (one ``KnowledgeBase`` each, shared by requests)."""

    def __init__(self, root: Path, *, auth: bool) -> None:
        self.root = root
        self.auth = auth
        self.keys = KeyStore(root)
        self.jobs = JobQueue()
        self._open: dict[str, KnowledgeBase] = {}
        self._lock = threading.Lock()

    def access(self, request: Request) -> Access:
        if not self.auth:
            return Access()
        header = request.headers.get("authorization", "")
        scheme, _, secret = header.partition(" ")
        key = self.keys.authenticate(secret.strip()) if scheme.lower() == "bearer" else None
        if key is None:
            raise ApiError(
                401, "unauthorized", "a valid API key is required (Authorization: Bearer ...)"
            )
        return Access.of(key)

    def kb(self, name: str, access: Access, *, write: bool = False) -> KnowledgeBase:
        """The knowledge base ``name`` if the key may use it this way (403 otherwise, before
        anything about its existence is looked at)."""
        if not access.grants(name) or not (access.write if write else access.read):
            raise ApiError(
                403, "forbidden", f"this key may not {'write to' if write else 'read'} {name!r}"
            )
        with self._lock:
            if name in self._open:
                return self._open[name]
            path = self.root / name
            if not is_kb_name(name) or not is_knowledge_base(path):
                raise ApiError(404, "not_found", f"no knowledge base {name!r}")
            kb = self._open[name] = KnowledgeBase(path, create=False)
            return kb

    def create(self, request: CreateKnowledgeBase, access: Access) -> KnowledgeBase:
        if not is_kb_name(request.name):
            raise ApiError(
                400, "invalid_argument", f"{request.name!r} is not a knowledge-base name"
            )
        if not (access.grants(request.name) and access.write):
            raise ApiError(403, "forbidden", f"this key may not create {request.name!r}")
        with self._lock:
            path = self.root / request.name
            if path.exists():
                raise ApiError(409, "conflict", f"{request.name!r} already exists")
            kb = KnowledgeBase(
                path,
                chunk_chars=request.chunk_chars,
                overlap_chars=request.overlap_chars,
                stemmer=request.stemmer,
                embedding=request.embedding,
            )
            self._open[request.name] = kb
            return kb

    def delete(self, name: str, access: Access) -> None:
        kb = self.kb(name, access, write=True)
        with self._lock:
            self._open.pop(name, None)
            kb.close()
            delete_knowledge_base(kb.path)

    def names(self, access: Access) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(
            p.name
            for p in self.root.iterdir()
            if is_kb_name(p.name) and access.grants(p.name) and is_knowledge_base(p)
        )

    def close(self) -> None:
        self.jobs.close()
        with self._lock:
            for kb in self._open.values():
                kb.close()
            self._open.clear()


def current_access(request: Request) -> Access:
    """The caller's access, from its key (a FastAPI dependency)."""
    service: Service = request.app.state.service
    return service.access(request)


Auth = Annotated[Access, Depends(current_access)]


def create_app(kb_root: str | Path, *, auth: bool = True) -> FastAPI:
    """The service over every knowledge base under ``kb_root``; ``auth=False`` grants every
    request everything (local development only)."""
    service = Service(Path(kb_root), auth=auth)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        service.close()

    app = FastAPI(
        title="ragspine",
        version=__version__,
        description="Retrieval for RAG with citations: search, ingest and manage knowledge bases.",
        lifespan=lifespan,
        docs_url=None,  # Swagger UI and ReDoc load scripts from a CDN: offline they stay blank
        redoc_url=None,
    )
    app.state.service = service

    @app.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> JSONResponse:
        return _error(exc.status, exc.code, exc.message)

    @app.exception_handler(InvalidArgumentError)
    async def invalid(_: Request, exc: InvalidArgumentError) -> JSONResponse:
        return _error(400, "invalid_argument", str(exc))

    @app.exception_handler(KnowledgeBaseError)
    async def kb_error(_: Request, exc: KnowledgeBaseError) -> JSONResponse:
        return _error(400, "invalid_argument", str(exc))

    @app.exception_handler(RagspineError)
    async def failed(_: Request, exc: RagspineError) -> JSONResponse:
        return _error(422, "unprocessable", str(exc))

    @app.exception_handler(RequestValidationError)
    async def validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}"
            for e in exc.errors()
        )
        return _error(422, "invalid_request", problems or "invalid request")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return _error(exc.status_code, code, str(exc.detail))

    @app.get("/healthz", tags=["service"])
    def healthz() -> dict[str, Any]:
        return {"status": "ok", "version": __version__}

    @app.get("/v1/kbs", tags=["knowledge bases"])
    def list_kbs(access: Auth) -> dict[str, Any]:
        return {"kbs": [{"name": name} for name in service.names(access)]}

    @app.post("/v1/kbs", status_code=201, tags=["knowledge bases"])
    def create_kb(body: CreateKnowledgeBase, access: Auth) -> dict[str, Any]:
        kb = service.create(body, access)
        return {"name": body.name, "settings": kb.config}

    @app.delete("/v1/kbs/{kb}", tags=["knowledge bases"])
    def delete_kb(kb: str, access: Auth) -> dict[str, Any]:
        service.delete(kb, access)
        return {"deleted": kb}

    @app.get("/v1/kbs/{kb}/documents", tags=["documents"])
    def list_documents(kb: str, access: Auth) -> dict[str, Any]:
        records = service.kb(kb, access).documents()
        visible = [r for r in records if access.clearance or not is_restricted(r.sensitivity)]
        return {"documents": [asdict(r) for r in visible]}

    @app.post(
        "/v1/kbs/{kb}/documents",
        tags=["documents"],
        responses={202: {"description": "an upload, running as a job"}},
        openapi_extra={"requestBody": {"required": True, "content": {
            "application/json": {"schema": DocumentIn.model_json_schema()},
            "multipart/form-data": {"schema": {"type": "object", "properties": {
                "files": {"type": "array", "items": {"type": "string", "format": "binary"}},
                "metadata": {"type": "string", "description": "a JSON object for every file"},
            }, "required": ["files"]}},
        }}},
    )  # fmt: skip
    async def add_documents(kb: str, request: Request, access: Auth) -> JSONResponse:
        """A JSON document is written at once; uploaded files (multipart ``files``, any loader
        format) are ingested by a job: 202 and its id, then ``GET /v1/jobs/{id}``."""
        knowledge_base = service.kb(kb, access, write=True)
        if request.headers.get("content-type", "").startswith("multipart/form-data"):
            form = await request.form()
            uploads = [f for f in form.getlist("files") if isinstance(f, StarletteUpload)]
            if not uploads:
                raise ApiError(400, "invalid_argument", "a multipart upload needs 'files'")
            raw_metadata = form.get("metadata")
            extra = _json_object(raw_metadata if isinstance(raw_metadata, str) else "{}")
            staging = Path(tempfile.mkdtemp(prefix="upload-", dir=_uploads(service.root)))
            folder = staging / "uploads"
            folder.mkdir()
            for item in uploads:
                name = Path(item.filename or "upload").name or "upload"
                (folder / name).write_bytes(await item.read())
            job = service.jobs.submit(
                kb,
                len(uploads),
                staging,
                lambda progress: knowledge_base.ingest(folder, extra, progress=progress),
            )
            return JSONResponse(job.to_dict(), status_code=202)
        try:
            body = DocumentIn.model_validate(await request.json())
        except ValueError as exc:
            raise ApiError(422, "invalid_request", f"expected a JSON document: {exc}") from exc
        report = await run_in_threadpool(
            knowledge_base.add_documents,
            [Document(body.doc_id, body.text, body.title, body.metadata, body.sensitivity)],
        )
        return JSONResponse({"doc_id": body.doc_id, **report.to_dict()})

    @app.get("/v1/jobs/{job_id}", tags=["documents"])
    def job_status(job_id: str, access: Auth) -> dict[str, Any]:
        job = service.jobs.get(job_id)
        if job is None or not access.grants(job.kb):
            raise ApiError(404, "not_found", f"no job {job_id!r}")
        return job.to_dict()

    @app.delete("/v1/kbs/{kb}/documents/{doc_id:path}", tags=["documents"])
    def delete_document(kb: str, doc_id: str, access: Auth) -> dict[str, Any]:
        knowledge_base = service.kb(kb, access, write=True)
        record = next((r for r in knowledge_base.documents() if r.doc_id == doc_id), None)
        if record is None or (is_restricted(record.sensitivity) and not access.clearance):
            raise ApiError(404, "not_found", f"no document {doc_id!r} in {kb!r}")
        return {"doc_id": doc_id, "retired": knowledge_base.delete_document(doc_id)}

    @app.post("/v1/kbs/{kb}/search", tags=["search"])
    def search(kb: str, body: SearchRequest, access: Auth) -> dict[str, Any]:
        return _search(service.kb(kb, access), body, access, doc_ids=body.doc_ids)

    @app.post("/v1/search", tags=["search"])
    def search_many(body: MultiSearchRequest, access: Auth) -> dict[str, Any]:
        """One query over several knowledge bases at once, fused by RRF; every result names
        its ``library_id`` (R31)."""
        bases = {name: service.kb(name, access) for name in dict.fromkeys(body.kbs)}
        with MultiIndexRetriever(bases) as multi:
            return _search(multi, body, access)

    if (STATIC / "index.html").is_file():
        app.mount("/static", StaticFiles(directory=STATIC), name="static")

        @app.get("/", include_in_schema=False)
        def page() -> FileResponse:
            return FileResponse(STATIC / "index.html")

    return app


def _search(
    index: SearchIndex, body: SearchRequest, access: Access, doc_ids: list[str] | None = None
) -> dict[str, Any]:
    """The search response; RESTRICTED chunks only for a key with clearance (R1: the service's
    exit), filters dropped only when the request allows it (R4)."""
    start = time.perf_counter()
    found = search_with_retry(
        index,
        body.query,
        top_k=body.top_k,
        filters=body.filters,
        doc_ids=doc_ids,
        mode=body.mode,
        rerank=body.rerank,
        include_restricted=access.clearance,
        retry_without_filters=body.retry_without_filters,
    )
    return {
        "results": [
            snippet_dict(s, filters_dropped=found.filters_dropped)
            for s in found
            if access.clearance or not is_restricted(s.sensitivity)
        ],
        "degraded": found.degraded,
        "degraded_reasons": list(found.degraded_reasons),
        "filters_dropped": found.filters_dropped,
        "routing_fallback": found.routing_fallback,
        "timing_ms": round(1000 * (time.perf_counter() - start), 3),
    }


def _uploads(root: Path) -> Path:
    folder = root / UPLOADS
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError as exc:
        raise ApiError(400, "invalid_argument", f"metadata is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ApiError(400, "invalid_argument", "metadata must be a JSON object")
    return value
