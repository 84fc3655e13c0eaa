"""HTML to text with the standard library: block elements become paragraphs."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

from ragspine.documents.loaders import LoadedDocument, decode_text

_BLOCKS = {
    "p", "div", "section", "article", "header", "footer", "main", "aside", "nav", "li", "ul",
    "ol", "table", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "br", "hr",
    "dd", "dt", "figcaption", "td", "th",
}  # fmt: skip
_SKIP = {"script", "style", "head", "noscript", "template", "svg"}
_CHARSET = re.compile(rb"""<meta[^>]+charset=["']?([A-Za-z0-9_\-]+)""", re.IGNORECASE)


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title: list[str] = []
        self.h1: list[str] = []
        self._skip_depth = 0
        self._in_title = False
        self._in_h1 = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        if tag in _SKIP:
            self._skip_depth += 1
        if tag == "h1":
            self._in_h1 = True
        if tag in _BLOCKS:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in _SKIP and self._skip_depth:
            self._skip_depth -= 1
        if tag == "h1":
            self._in_h1 = False
        if tag in _BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title.append(data)
        elif not self._skip_depth:
            self.parts.append(data)
            if self._in_h1:
                self.h1.append(data)


def _collapse(text: str) -> str:
    lines = (re.sub(r"[ \t\f\v\u00a0]+", " ", line).strip() for line in text.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def load_html(path: Path, data: bytes) -> LoadedDocument:
    declared = _CHARSET.search(data[:4096])
    text = None
    if declared:
        try:
            text = data.decode(declared.group(1).decode("ascii"))
        except (LookupError, UnicodeDecodeError):
            text = None
    parser = _TextExtractor()
    parser.feed(text if text is not None else decode_text(data, path))
    parser.close()
    body = _collapse("".join(parser.parts))
    title = " ".join("".join(parser.title).split()) or " ".join("".join(parser.h1).split())
    return LoadedDocument(text=body, title=title or path.stem)
