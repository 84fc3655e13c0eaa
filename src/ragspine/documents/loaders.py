"""Turn a file into plain text with page spans and metadata; one reader per format.

The loaded text is what chunks cite, so readers keep it faithful: Markdown stays Markdown,
PDF pages are joined with a blank line and their character spans recorded.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ragspine.errors import LoaderError


@dataclass(frozen=True)
class LoadedDocument:
    text: str
    title: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    pages: tuple[tuple[int, int, int], ...] = ()  # (page number from 1, start, end)


def decode_text(data: bytes, path: Path) -> str:
    """UTF-8 (with or without BOM), UTF-16 with BOM, else GB18030 for legacy Chinese files."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        encodings: tuple[str, ...] = ("utf-16",)
    else:
        encodings = ("utf-8-sig", "gb18030")
    for encoding in encodings:
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        if "\x00" not in text:
            return text.replace("\r\n", "\n").replace("\r", "\n")
    raise LoaderError(str(path), "not a text file (undecodable bytes)")


def _load_text(path: Path, data: bytes) -> LoadedDocument:
    text = decode_text(data, path)
    first_line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return LoadedDocument(text=text, title=first_line[:120] or path.stem)


_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*(?:\n|\Z)", re.DOTALL)
_MD_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)


def _load_markdown(path: Path, data: bytes) -> LoadedDocument:
    text = decode_text(data, path)
    metadata: dict[str, Any] = {}
    match = _FRONT_MATTER.match(text)
    if match:
        try:
            parsed = yaml.safe_load(match.group(1))
        except yaml.YAMLError as exc:
            raise LoaderError(str(path), f"front matter is not valid YAML: {exc}") from exc
        if parsed is not None and not isinstance(parsed, dict):
            raise LoaderError(str(path), "front matter must be a mapping of keys to values")
        metadata = {str(k): _plain(v) for k, v in (parsed or {}).items()}
        text = text[match.end() :]
    heading = _MD_HEADING.search(text)
    title = str(metadata.pop("title", "") or (heading.group(1) if heading else "") or path.stem)
    return LoadedDocument(text=text, title=title, metadata=metadata)


def _plain(value: Any) -> Any:
    """YAML dates and other objects become strings so metadata stays JSON."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


def _readers() -> dict[str, Callable[[Path, bytes], LoadedDocument]]:
    from ragspine.documents.html import load_html
    from ragspine.documents.office import load_docx, load_pdf

    return {
        ".txt": _load_text,
        ".text": _load_text,
        ".md": _load_markdown,
        ".markdown": _load_markdown,
        ".html": load_html,
        ".htm": load_html,
        ".pdf": load_pdf,
        ".docx": load_docx,
    }


def supported_suffixes() -> tuple[str, ...]:
    return tuple(sorted(_readers()))


def load_file(path: str | Path) -> LoadedDocument:
    """Read one file by its suffix; any failure is a :class:`LoaderError` naming the file."""
    path = Path(path)
    reader = _readers().get(path.suffix.lower())
    if reader is None:
        raise LoaderError(
            str(path), f"unsupported file type {path.suffix!r}; supported: {supported_suffixes()}"
        )
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise LoaderError(str(path), f"cannot read file: {exc.strerror or exc}") from exc
    try:
        return reader(path, data)
    except LoaderError:
        raise
    except Exception as exc:  # parsers raise anything on corrupt input
        raise LoaderError(str(path), f"cannot parse {path.suffix} file: {exc}") from exc
