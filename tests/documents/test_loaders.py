from __future__ import annotations

import re
from pathlib import Path

import pytest

from ragspine.documents.loaders import load_file
from ragspine.documents.walk import iter_files, read_sidecar
from ragspine.errors import LoaderError
from tests.conftest import make_docx, make_pdf


def test_r14_text_utf8_bom_and_gb18030(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes("\ufeff第一行\r\n第二行".encode())
    (tmp_path / "b.txt").write_bytes("营收下滑的原因".encode("gb18030"))
    assert load_file(tmp_path / "a.txt").text == "第一行\n第二行"
    assert load_file(tmp_path / "b.txt").text == "营收下滑的原因"
    assert load_file(tmp_path / "a.txt").title == "第一行"


def test_r14_markdown_front_matter_becomes_metadata(tmp_path: Path) -> None:
    path = tmp_path / "r.md"
    path.write_text(
        "---\ntitle: Annual report\nsensitivity: restricted\nyear: 2023\ndate: 2024-01-02\n---\n"
        "# Heading\n\nBody text.\n",
        encoding="utf-8",
    )
    doc = load_file(path)
    assert doc.title == "Annual report"
    assert doc.metadata == {"sensitivity": "restricted", "year": 2023, "date": "2024-01-02"}
    assert doc.text == "# Heading\n\nBody text.\n"


def test_r14_markdown_title_falls_back_to_first_heading(tmp_path: Path) -> None:
    path = tmp_path / "r.md"
    path.write_text("intro\n\n## The Heading ##\n\ntext", encoding="utf-8")
    assert load_file(path).title == "The Heading"


def test_r14_bad_front_matter_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.md"
    path.write_text("---\n: [unclosed\n---\nbody", encoding="utf-8")
    with pytest.raises(LoaderError, match=r"bad\.md"):
        load_file(path)


def test_r14_html_blocks_become_paragraphs(tmp_path: Path) -> None:
    path = tmp_path / "p.html"
    path.write_text(
        "<html><head><title>Page title</title><style>p{}</style></head><body>"
        "<h1>Head</h1><p>First &amp; one.</p><script>var x;</script><p>Second <b>bold</b></p>"
        "</body></html>",
        encoding="utf-8",
    )
    doc = load_file(path)
    assert doc.title == "Page title"
    assert doc.text == "Head\n\nFirst & one.\n\nSecond bold"


def test_r14_pdf_pages_are_recorded(tmp_path: Path) -> None:
    path = make_pdf(tmp_path / "d.pdf", ["Page one talks about apples.", "Page two is on pears."])
    doc = load_file(path)
    assert [p[0] for p in doc.pages] == [1, 2]
    for number, start, end in doc.pages:
        assert ("apples" if number == 1 else "pears") in doc.text[start:end]


def test_r14_docx_paragraphs(tmp_path: Path) -> None:
    path = make_docx(tmp_path / "d.docx", "标题", ["第一段。", "第二段。"])
    doc = load_file(path)
    assert doc.title == "标题"
    assert doc.text == "标题\n\n第一段。\n\n第二段。"


@pytest.mark.parametrize("name", ["broken.pdf", "broken.docx"])
def test_r6_corrupt_files_raise_loader_error_naming_the_file(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(b"this is not a real file \x00\x01\x02")
    with pytest.raises(LoaderError, match=re.escape(name)):
        load_file(path)


def test_r6_binary_text_and_unknown_suffix_are_errors(tmp_path: Path) -> None:
    (tmp_path / "bin.txt").write_bytes(b"\x00\xff\xfe\x00garbage")
    with pytest.raises(LoaderError, match=r"bin\.txt"):
        load_file(tmp_path / "bin.txt")
    (tmp_path / "x.xyz").write_text("hi")
    with pytest.raises(LoaderError, match="unsupported"):
        load_file(tmp_path / "x.xyz")
    with pytest.raises(LoaderError, match=r"missing\.txt"):
        load_file(tmp_path / "missing.txt")


def test_r14_walk_honours_globs_and_skips_sidecars(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "_drafts").mkdir()
    for rel in ("a.md", "sub/b.txt", "sub/c.pdf", "_drafts/d.txt", "e.xyz", ".hidden.txt"):
        (root / rel).write_text("x")
    (root / "a.md.meta.json").write_text('{"topic": "t"}')
    ids = [f.doc_id for f in iter_files([root])]
    assert ids == ["docs/_drafts/d.txt", "docs/a.md", "docs/sub/b.txt", "docs/sub/c.pdf"]
    ids = [f.doc_id for f in iter_files([root], exclude=["_drafts/**", "*.pdf"])]
    assert ids == ["docs/a.md", "docs/sub/b.txt"]
    assert [f.doc_id for f in iter_files([root], include=["**/*.txt"])] == [
        "docs/_drafts/d.txt",
        "docs/sub/b.txt",
    ]
    with pytest.raises(LoaderError, match="nowhere"):
        iter_files([tmp_path / "nowhere"])


def test_r14_sidecar_metadata(tmp_path: Path) -> None:
    (tmp_path / "a.pdf").write_bytes(b"")
    assert read_sidecar(tmp_path / "a.pdf") == {}
    (tmp_path / "a.pdf.meta.json").write_text('{"entity": "ACME"}')
    assert read_sidecar(tmp_path / "a.pdf") == {"entity": "ACME"}
    (tmp_path / "a.pdf.meta.json").write_text("[1, 2]")
    with pytest.raises(LoaderError, match=r"meta\.json"):
        read_sidecar(tmp_path / "a.pdf")
