"""The HTTP service as a real ``ragspine serve`` process on 127.0.0.1: every endpoint, the key
rules (401/403, no existence leaks), and RESTRICTED never reaching a key without clearance (R1,
the service's exit) — by search, by listing, or by an error message."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragspine import Document, KnowledgeBase
from tests.serve.server import create_key, run_cli, served

SECRET = "zqxmarker quarterly forecast collapse"
DOCS = [
    Document("report-2023", "ACME revenue fell in 2023 because widget demand dropped.",
             title="Report 2023", metadata={"year": 2023}),
    Document("report-2021", "ACME revenue grew in 2021 on strong widget demand.",
             title="Report 2021", metadata={"year": 2021}),
    Document("board-memo", f"ACME revenue {SECRET} widget demand.", title="Board memo",
             sensitivity="Restricted", metadata={"year": 2024}),
]  # fmt: skip


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("kbs")
    with KnowledgeBase(root / "alpha", embedding="none") as kb:
        kb.add_documents(DOCS)
    with KnowledgeBase(root / "beta", embedding="none") as kb:
        kb.add_documents([Document("beta-1", "Beta notes on solar panels.")])
    return root


@pytest.fixture(scope="module")
def keys(root: Path) -> dict[str, str]:
    return {
        "reader": create_key(root, "--kb", "alpha", "--read"),
        "cleared": create_key(root, "--kb", "alpha", "--read", "--clearance", "restricted"),
        "writer": create_key(root, "--kb", "alpha,gamma", "--read", "--write"),
        "beta": create_key(root, "--kb", "beta"),
        "admin": create_key(root, "--kb", "*", "--read", "--write", "--clearance", "restricted"),
    }


@pytest.fixture(scope="module")
def api(root: Path, keys: dict[str, str]) -> Iterator[str]:
    with served(root) as url:
        yield url


def call(api: str, method: str, path: str, key: str | None = None, **kwargs: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.request(method, f"{api}{path}", headers=headers, timeout=30, **kwargs)


def search(api: str, key: str, kb: str = "alpha", **body: Any) -> httpx.Response:
    return call(api, "POST", f"/v1/kbs/{kb}/search", key, json={"query": "ACME revenue", **body})


def test_r91_health_and_openapi_need_no_key(api: str) -> None:
    assert call(api, "GET", "/healthz").json()["status"] == "ok"
    schema = call(api, "GET", "/openapi.json").json()
    assert {"/v1/kbs", "/v1/kbs/{kb}/search", "/v1/kbs/{kb}/documents", "/v1/jobs/{job_id}"} <= set(
        schema["paths"]
    )


@pytest.mark.parametrize("header", [None, "Bearer nope", "Basic abc", "Bearer rsk_00000000_x"])
def test_r91_no_valid_key_is_401(api: str, header: str | None) -> None:
    headers = {"Authorization": header} if header else {}
    response = httpx.get(f"{api}/v1/kbs", headers=headers)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


def test_r91_a_key_sees_only_its_knowledge_bases(api: str, keys: dict[str, str]) -> None:
    assert call(api, "GET", "/v1/kbs", keys["reader"]).json() == {"kbs": [{"name": "alpha"}]}
    names = [k["name"] for k in call(api, "GET", "/v1/kbs", keys["admin"]).json()["kbs"]]
    assert names == ["alpha", "beta"]


def test_r91_outside_its_grants_is_403_and_never_says_whether_it_exists(
    api: str, keys: dict[str, str]
) -> None:
    existing = search(api, keys["reader"], kb="beta")
    missing = search(api, keys["reader"], kb="does-not-exist")
    assert existing.status_code == missing.status_code == 403
    assert existing.json()["error"]["message"].replace("beta", "X") == missing.json()["error"][
        "message"
    ].replace("does-not-exist", "X")
    assert search(api, keys["writer"], kb="gamma").status_code == 404  # granted, absent: 404
    assert call(api, "POST", "/v1/kbs/alpha/documents", keys["reader"],
                json={"doc_id": "x", "text": "y"}).status_code == 403  # fmt: skip


def test_r1_a_key_without_clearance_never_receives_restricted_text(
    api: str, keys: dict[str, str]
) -> None:
    for key in ("reader", "writer"):
        response = search(api, keys[key], top_k=50, query=SECRET)
        body = json.dumps(response.json())
        assert response.status_code == 200 and "zqxmarker" not in body
        listing = call(api, "GET", "/v1/kbs/alpha/documents", keys[key]).json()
        assert {d["doc_id"] for d in listing["documents"]} == {"report-2021", "report-2023"}
    cleared = search(api, keys["cleared"], top_k=50, query=SECRET).json()
    assert cleared["results"][0]["doc_id"] == "board-memo"  # clearance sees it
    assert cleared["results"][0]["sensitivity"] == "RESTRICTED"


def test_r1_deleting_a_restricted_document_without_clearance_is_not_found(
    api: str, keys: dict[str, str]
) -> None:
    denied = call(api, "DELETE", "/v1/kbs/alpha/documents/board-memo", keys["writer"])
    assert denied.status_code == 404 and "zqxmarker" not in denied.text
    assert search(api, keys["cleared"], query=SECRET).json()["results"][0]["doc_id"] == "board-memo"


def test_r91_search_returns_link_snippets_with_every_score(api: str, keys: dict[str, str]) -> None:
    body = search(api, keys["reader"], top_k=2, filters={"year": {"gte": 2021}}).json()
    assert set(body) == {"results", "degraded", "degraded_reasons", "filters_dropped",
                         "routing_fallback", "timing_ms"}  # fmt: skip
    assert not body["degraded"] and not body["filters_dropped"] and body["timing_ms"] > 0
    top = body["results"][0]
    assert {"text", "doc_id", "chunk_id", "title", "source_locator", "sensitivity",
            "metadata", "scores", "year"} <= set(top)  # fmt: skip
    assert set(top["scores"]) == {"bm25", "vector", "fused", "rerank"}


def test_r4_filters_are_dropped_only_when_allowed_and_then_said(
    api: str, keys: dict[str, str]
) -> None:
    dropped = search(api, keys["reader"], filters={"year": 1999}).json()
    assert dropped["filters_dropped"] and dropped["results"]
    assert all(r["filters_dropped"] for r in dropped["results"])
    kept = search(api, keys["reader"], filters={"year": 1999}, retry_without_filters=False).json()
    assert kept["results"] == [] and not kept["filters_dropped"]


def test_r6_bad_requests_get_clear_errors_never_5xx(api: str, keys: dict[str, str]) -> None:
    cases = [
        search(api, keys["reader"], top_k=0),
        search(api, keys["reader"], mode="psychic"),
        search(api, keys["reader"], filters={"year": {"almost": 3}}),
        search(api, keys["reader"], rerank="magic"),
        call(api, "POST", "/v1/kbs/alpha/search", keys["reader"], content=b"{not json"),
        call(api, "POST", "/v1/kbs/alpha/search", keys["reader"], json={"top_k": 3}),
    ]
    for response in cases:
        assert 400 <= response.status_code < 500, response.text
        assert set(response.json()["error"]) == {"code", "message"}


def test_r6_a_failing_reranker_degrades_the_search_visibly(
    root: Path, keys: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGSPINE_RERANK_BASE_URL", "http://127.0.0.1:9/v1")  # nothing there
    monkeypatch.setenv("RAGSPINE_RERANK_TIMEOUT", "1")
    with served(root) as url:
        plain = search(url, keys["reader"]).json()
        reranked = search(url, keys["reader"], rerank="http")
    assert reranked.status_code == 200
    body = reranked.json()
    assert body["degraded"] and body["degraded_reasons"][0].startswith("http: ")
    assert [r["chunk_id"] for r in body["results"]] == [r["chunk_id"] for r in plain["results"]]


def test_r12_json_documents_are_added_searchable_and_retired(
    api: str, keys: dict[str, str]
) -> None:
    added = call(api, "POST", "/v1/kbs/alpha/documents", keys["writer"],
                 json={"doc_id": "note-1", "text": "Geothermal wells heat the campus.",
                       "title": "Note", "metadata": {"year": 2022}})  # fmt: skip
    assert added.status_code == 200 and added.json()["added"] == 1
    found = search(api, keys["reader"], query="geothermal campus").json()["results"]
    assert found[0]["doc_id"] == "note-1"
    retired = call(api, "DELETE", "/v1/kbs/alpha/documents/note-1", keys["writer"])
    assert retired.json() == {"doc_id": "note-1", "retired": 1}
    after = search(api, keys["reader"], query="geothermal campus").json()["results"]
    assert all(r["doc_id"] != "note-1" for r in after)
    assert call(api, "DELETE", "/v1/kbs/alpha/documents/note-1", keys["writer"]).status_code == 404


def test_r14_uploads_run_as_a_job_with_progress_and_per_file_errors(
    api: str, keys: dict[str, str]
) -> None:
    files = [
        ("files", ("wind.md", b"# Wind\n\nOffshore turbines feed the grid.", "text/markdown")),
        ("files", ("broken.pdf", b"%PDF-1.4 this is not really a pdf", "application/pdf")),
    ]
    response = call(api, "POST", "/v1/kbs/alpha/documents", keys["writer"], files=files,
                    data={"metadata": json.dumps({"source": "upload"})})  # fmt: skip
    assert response.status_code == 202
    job = response.json()
    for _ in range(100):
        job = call(api, "GET", f"/v1/jobs/{job['id']}", keys["writer"]).json()
        if job["status"] in ("done", "failed"):
            break
        time.sleep(0.1)
    assert job["status"] == "done" and job["report"]["added"] == 1
    assert [e["file"] for e in job["errors"]] == ["broken.pdf"]
    assert ".ragspine-uploads" not in json.dumps(job)  # no server paths in what clients see
    assert call(api, "GET", f"/v1/jobs/{job['id']}", keys["beta"]).status_code == 404
    found = search(api, keys["reader"], query="offshore turbines").json()["results"]
    assert found[0]["doc_id"] == "uploads/wind.md" and found[0]["source"] == "upload"


def test_r91_create_and_delete_knowledge_bases(api: str, keys: dict[str, str]) -> None:
    created = call(api, "POST", "/v1/kbs", keys["writer"], json={"name": "gamma"})
    assert created.status_code == 201 and created.json()["name"] == "gamma"
    assert call(api, "POST", "/v1/kbs", keys["writer"], json={"name": "gamma"}).status_code == 409
    assert call(api, "POST", "/v1/kbs", keys["writer"], json={"name": "delta"}).status_code == 403
    assert call(api, "POST", "/v1/kbs", keys["admin"], json={"name": "../up"}).status_code == 400
    assert call(api, "DELETE", "/v1/kbs/gamma", keys["writer"]).json() == {"deleted": "gamma"}
    assert call(api, "DELETE", "/v1/kbs/gamma", keys["writer"]).status_code == 404


def test_r91_keys_list_and_revoke(root: Path, api: str) -> None:
    secret = create_key(root, "--kb", "alpha")
    assert search(api, secret).status_code == 200
    listed = json.loads(run_cli("keys", "list", "--kb-root", str(root), "--json").stdout)
    key_id = secret.split("_")[1]
    assert any(k["key_id"] == key_id for k in listed) and secret not in json.dumps(listed)
    assert run_cli("keys", "revoke", key_id, "--kb-root", str(root)).returncode == 0
    assert search(api, secret).status_code == 401
    stored = (root / ".ragspine-keys.json").read_text()
    assert secret not in stored and (root / ".ragspine-keys.json").stat().st_mode & 0o077 == 0


def test_r91_no_auth_serves_everything_and_warns(root: Path) -> None:
    printed: list[str] = []
    with served(root, "--no-auth", stderr=printed) as url:
        assert httpx.get(f"{url}/v1/kbs").status_code == 200
        assert "zqxmarker" in httpx.post(f"{url}/v1/kbs/alpha/search",
                                         json={"query": SECRET}).text  # fmt: skip
    assert "warning: --no-auth" in printed[0]


def test_r12_concurrent_ingest_and_search_never_see_a_half_written_version(
    api: str, keys: dict[str, str]
) -> None:
    """A document of several chunks is rewritten while searches run: every search sees all its
    chunks, of one version, never a mix, a part, or nothing."""
    import threading

    def version_text(n: int) -> str:
        return "\n\n".join(f"Livedoc paragraph {p} of release v{n:03d}. " * 6 for p in range(3))

    def write(n: int) -> None:
        response = call(api, "POST", "/v1/kbs/alpha/documents", keys["writer"],
                        json={"doc_id": "livedoc", "text": version_text(n)})  # fmt: skip
        assert response.status_code == 200

    write(0)
    query = {"query": "livedoc paragraph release", "top_k": 20}
    first = search(api, keys["reader"], **query).json()["results"]
    size = len([r for r in first if r["doc_id"] == "livedoc"])
    assert size >= 2
    seen: list[set[str]] = []
    failures: list[str] = []
    done = threading.Event()

    def searcher() -> None:
        while not done.is_set():
            body = search(api, keys["reader"], **query).json()
            chunks = [r for r in body["results"] if r["doc_id"] == "livedoc"]
            versions = {r["text"].split("release ")[1][:4] for r in chunks}
            seen.append(versions)
            if (
                len(chunks) != size
                or len(versions) != 1
                or len({r["version"] for r in chunks}) != 1
            ):
                failures.append(f"{len(chunks)} chunks of versions {sorted(versions)}")

    threads = [threading.Thread(target=searcher) for _ in range(3)]
    for thread in threads:
        thread.start()
    for n in range(1, 16):
        write(n)
    done.set()
    for thread in threads:
        thread.join()
    assert not failures, failures[:5]
    assert len({v for s in seen for v in s}) > 2  # the searches really ran during the rewrites


def test_r31_one_search_over_several_knowledge_bases(api: str, keys: dict[str, str]) -> None:
    body = {"kbs": ["alpha", "beta"], "query": "solar panels ACME revenue", "top_k": 10}
    found = call(api, "POST", "/v1/search", keys["admin"], json=body).json()
    assert {r["library_id"] for r in found["results"]} == {"alpha", "beta"}
    assert not found["routing_fallback"] and not found["degraded"]
    assert call(api, "POST", "/v1/search", keys["reader"], json=body).status_code == 403
    secret = {"kbs": ["alpha"], "query": SECRET, "top_k": 50}
    assert "zqxmarker" not in call(api, "POST", "/v1/search", keys["reader"], json=secret).text
    assert (
        call(api, "POST", "/v1/search", keys["admin"], json={"kbs": [], "query": "x"}).status_code
        == 422
    )
