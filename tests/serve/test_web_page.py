"""The service's web page, end to end: a real ``ragspine serve`` process and a headless Chromium
driving the page as a user would — key, knowledge base, search with highlights and every stage's
score, the errors a user must see (bad filters, bad reranker, bad key), and an upload job — and
RESTRICTED text never reaching a key without clearance (R1)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ragspine import Document, KnowledgeBase
from tests.serve.server import create_key, served

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip(f"no Chromium at {CHROMIUM}", allow_module_level=True)

from playwright.sync_api import Browser, Page, Request, expect, sync_playwright  # noqa: E402

BROWSER_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
]  # fmt: skip
MARKER = "zqxmarker board secret"
DOCS = [
    Document("report-2023", "ACME revenue fell in 2023 because widget demand dropped.",
             title="Report 2023", metadata={"year": 2023}),
    Document("report-zh", "阿克米公司二零二三年收入下降，因为小部件需求减少。", title="年度报告"),
    Document("markup", "ACME markup <b>bold</b> <img src=x onerror=alert(1)> stays text.",
             title="Markup"),
    Document("handbook", "ACME handbook for staff: widget safety.", title="Handbook",
             sensitivity="INTERNAL"),
    Document("memo", f"ACME revenue {MARKER} widget demand.", title="Memo",
             sensitivity="RESTRICTED"),
]  # fmt: skip
TIMEOUT_MS = 10_000


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("kbs")
    with KnowledgeBase(root / "alpha") as kb:
        kb.add_documents(DOCS)
    return root


@pytest.fixture(scope="module")
def key(root: Path) -> str:
    return create_key(root, "--kb", "alpha", "--read", "--write")  # no clearance


@pytest.fixture(scope="module")
def url(root: Path, key: str) -> Iterator[str]:
    with served(root) as base:
        yield base


@pytest.fixture(scope="module")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    home = tmp_path_factory.mktemp("chromium-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CONFIG_HOME", str(home / "config"))
        mp.setenv("XDG_CACHE_HOME", str(home / "cache"))
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=BROWSER_ARGS
            )
            yield browser
            browser.close()


@pytest.fixture
def tab(chromium: Browser, url: str) -> Iterator[Page]:
    context = chromium.new_context(base_url=url)
    context.set_default_timeout(TIMEOUT_MS)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.goto("/")
    yield tab
    context.close()
    assert errors == [], "the page's script failed"


def connect(tab: Page, key: str) -> None:
    tab.get_by_label("API key").fill(key)
    tab.locator("#connect").click()
    expect(tab.locator("#connection-status")).to_contain_text("Connected")
    tab.get_by_label("Knowledge base").select_option("alpha")


def search(tab: Page, query: str) -> None:
    tab.get_by_label("Query").fill(query)
    tab.locator("#search").click()


def test_the_page_searches_with_highlights_locators_and_every_score(tab: Page, key: str) -> None:
    expect(tab.locator("#connection-status")).to_contain_text("401")  # no key yet
    connect(tab, key)
    search(tab, "ACME revenue")
    first = tab.get_by_test_id("result").first
    expect(first.get_by_test_id("locator")).to_have_text(re.compile(r"^report-2023#"))
    expect(first.locator("h3")).to_contain_text("Report 2023")
    for label in ("BM25", "vector", "fused", "rerank"):
        expect(first.get_by_test_id("scores")).to_contain_text(label)
    expect(first.locator("[data-score=bm25]")).to_have_text(re.compile(r"^\d+\.\d{4}$"))
    expect(first.locator("[data-score=rerank]")).to_have_text("–")  # null: no reranker
    expect(first.locator("mark").first).to_have_text(re.compile("^(ACME|revenue)$"))
    expect(tab.get_by_test_id("timing")).to_contain_text(re.compile(r"\d+ results? in"))
    assert MARKER not in tab.content()


def test_restricted_text_never_reaches_the_page_and_other_labels_show(tab: Page, key: str) -> None:
    connect(tab, key)
    search(tab, MARKER)  # the marker's own words: the memo would rank first if it were visible
    expect(tab.get_by_test_id("timing")).to_be_visible()
    assert "zqxmarker" not in tab.content()
    search(tab, "handbook staff")
    badge = tab.get_by_test_id("result").first.get_by_test_id("sensitivity")
    expect(badge).to_have_text("INTERNAL")
    assert "zqxmarker" not in tab.content()


def test_snippet_text_is_never_parsed_as_html(tab: Page, key: str) -> None:
    connect(tab, key)
    search(tab, "markup bold")
    text = tab.get_by_test_id("result").first.get_by_test_id("snippet-text")
    expect(text).to_contain_text("<img src=x onerror=alert(1)>")
    assert text.locator("img, b").count() == 0
    expect(text.locator("mark")).to_have_text(["markup", "bold"])


def test_a_chinese_query_highlights_each_of_its_characters(tab: Page, key: str) -> None:
    connect(tab, key)
    search(tab, "收入下降")
    first = tab.get_by_test_id("result").first
    expect(first.get_by_test_id("locator")).to_have_text(re.compile(r"^report-zh#"))
    expect(first.locator("mark")).to_have_text(["收", "入", "下", "降"])


def test_invalid_filters_show_an_error_and_send_nothing(tab: Page, key: str) -> None:
    connect(tab, key)
    sent: list[str] = []
    tab.on("request", lambda r: sent.append(r.url) if r.method == "POST" else None)
    tab.get_by_label("Filters").fill('{"year": {"gte": 2020}')
    search(tab, "ACME")
    expect(tab.locator("#search-error")).to_contain_text("not valid JSON")
    tab.get_by_label("Filters").fill("[1, 2]")
    tab.locator("#search").click()
    expect(tab.locator("#search-error")).to_contain_text("must be a JSON object")
    tab.wait_for_timeout(200)
    assert sent == []
    expect(tab.get_by_test_id("result")).to_have_count(0)


def test_filters_that_match_nothing_are_dropped_and_the_page_says_so(tab: Page, key: str) -> None:
    connect(tab, key)
    tab.get_by_label("Filters").fill('{"year": {"gte": 2099}}')
    with tab.expect_request(lambda r: r.url.endswith("/search")) as request:
        search(tab, "ACME revenue")
    assert request.value.post_data_json["filters"] == {"year": {"gte": 2099}}
    expect(tab.get_by_test_id("filters-dropped")).to_contain_text("Filters dropped")
    expect(tab.get_by_test_id("result").first).to_be_visible()


def test_a_bad_reranker_shows_the_servers_message(tab: Page, key: str, url: str) -> None:
    connect(tab, key)
    tab.get_by_label("Reranker").fill("bogus-reranker")
    tab.get_by_label("Mode").select_option("bm25")
    with tab.expect_request(lambda r: r.url.endswith("/search")) as request:
        search(tab, "ACME")
    sent = request.value.post_data_json
    assert sent["rerank"] == "bogus-reranker" and sent["mode"] == "bm25"
    expected = httpx.post(
        f"{url}/v1/kbs/alpha/search",
        json={"query": "ACME", "rerank": "bogus-reranker"},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert expected.status_code == 400
    message = expected.json()["error"]["message"]
    expect(tab.locator("#search-error")).to_contain_text(message)


def test_a_wrong_key_shows_the_401_message(tab: Page) -> None:
    tab.get_by_label("API key").fill("rsk_00000000_wrong")
    tab.locator("#connect").click()
    status = tab.locator("#connection-status")
    expect(status).to_contain_text("401")
    expect(status).to_contain_text("a valid API key is required")
    assert tab.get_by_label("Knowledge base").locator("option").count() == 0
    assert tab.evaluate("localStorage.getItem('ragspine.apiKey')") == "rsk_00000000_wrong"


def test_an_upload_shows_its_job_then_search_finds_the_text(
    tab: Page, key: str, tmp_path: Path
) -> None:
    connect(tab, key)
    note = tmp_path / "wind.md"
    note.write_text("# Wind\n\nOffshore turbines feed the grid near Qwertyville.\n")
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4 this is not really a pdf")
    tab.get_by_label("Files", exact=True).set_input_files([note, broken])
    tab.get_by_label("Metadata for every file").fill('{"source": "upload"}')
    posted: list[Request] = []
    tab.on("request", lambda r: posted.append(r) if r.method == "POST" else None)
    tab.locator("#upload").click()
    expect(tab.locator("#job")).to_have_attribute("data-status", "done")
    expect(tab.locator("#job-status")).to_have_text(
        re.compile(r"^done — \d+ / \d+ \(2 files uploaded\)$")
    )
    expect(tab.get_by_test_id("job-error")).to_have_count(1)
    expect(tab.get_by_test_id("job-error")).to_contain_text("broken.pdf")
    expect(tab.locator("#job-report")).to_contain_text("Added 1")
    expect(tab.locator("#job-report")).to_contain_text("failed 1")
    assert [r.url.rsplit("/", 1)[-1] for r in posted] == ["documents"]

    search(tab, "offshore turbines Qwertyville")
    first = tab.get_by_test_id("result").first
    expect(first.get_by_test_id("locator")).to_contain_text("wind.md")
    expect(first.locator("mark")).to_have_text(["Offshore", "turbines", "Qwertyville"])


def test_the_page_needs_no_key_when_the_server_runs_without_auth(
    chromium: Browser, root: Path
) -> None:
    with served(root, "--no-auth") as base:
        context = chromium.new_context(base_url=base)
        try:
            tab = context.new_page()
            tab.goto("/")
            expect(tab.locator("#connection-status")).to_contain_text("Connected")
            expect(tab.get_by_label("Knowledge base")).to_have_value("alpha")
            search(tab, "ACME revenue")
            expect(tab.get_by_test_id("result").first.locator("mark").first).to_be_visible()
        finally:
            context.close()
