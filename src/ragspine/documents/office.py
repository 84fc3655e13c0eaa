"""PDF (page spans for locators) and DOCX readers; both need the ``[docs]`` extra."""

from __future__ import annotations

import io
from pathlib import Path

from ragspine.documents.loaders import LoadedDocument
from ragspine.errors import LoaderError

_PAGE_SEPARATOR = "\n\n"


def _missing_extra(path: Path, package: str) -> LoaderError:
    return LoaderError(str(path), f"needs {package}: pip install 'ragspine[docs]'")


def load_pdf(path: Path, data: bytes) -> LoadedDocument:
    try:
        from pypdf import PdfReader
    except ImportError as exc:
        raise _missing_extra(path, "pypdf") from exc
    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted:
        raise LoaderError(str(path), "PDF is encrypted")
    parts: list[str] = []
    pages: list[tuple[int, int, int]] = []
    offset = 0
    for number, page in enumerate(reader.pages, start=1):
        text = (page.extract_text() or "").replace("\r\n", "\n").strip()
        if not text:
            continue
        if parts:
            parts.append(_PAGE_SEPARATOR)
            offset += len(_PAGE_SEPARATOR)
        parts.append(text)
        pages.append((number, offset, offset + len(text)))
        offset += len(text)
    meta_title = ""
    if reader.metadata is not None and reader.metadata.title:
        meta_title = str(reader.metadata.title).strip()
    body = "".join(parts)
    first_line = next((ln.strip() for ln in body.splitlines() if ln.strip()), "")
    return LoadedDocument(
        text=body, title=meta_title or first_line[:120] or path.stem, pages=tuple(pages)
    )


def load_docx(path: Path, data: bytes) -> LoadedDocument:
    try:
        import docx
    except ImportError as exc:
        raise _missing_extra(path, "python-docx") from exc
    document = docx.Document(io.BytesIO(data))
    blocks: list[str] = []
    heading = ""
    for paragraph in document.paragraphs:
        text = paragraph.text.strip()
        if not text:
            continue
        style = (paragraph.style.name or "") if paragraph.style is not None else ""
        if not heading and style.lower().startswith(("heading", "title")):
            heading = text
        blocks.append(text)
    for table in document.tables:
        for row in table.rows:
            cells = [c.text.strip() for c in row.cells if c.text.strip()]
            if cells:
                blocks.append(" | ".join(cells))
    title = (document.core_properties.title or "").strip() or heading
    return LoadedDocument(text="\n\n".join(blocks), title=title or path.stem)
