from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples" / "corpus"
DATASETS = Path(os.environ.get("RAGSPINE_DATASETS", REPO.parent / "shared" / "datasets"))


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never depend on the developer's RAGSPINE_* variables. Knowledge bases are lexical
    unless a test asks for vectors (the default, ``auto``, is tested on its own)."""
    for key in list(os.environ):
        if key.startswith("RAGSPINE_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "none")


def make_pdf(path: Path, pages: list[str]) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 6, text)
    pdf.output(str(path))
    return path


def make_docx(path: Path, title: str, paragraphs: list[str]) -> Path:
    import docx

    document = docx.Document()
    document.add_heading(title, level=1)
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    document.save(str(path))
    return path
