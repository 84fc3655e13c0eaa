#!/usr/bin/env python3
"""Build the ragspine sample corpus under ``examples/corpus/``.

Maintainer tool. The generated files are committed to the repository; the
demo reads ``examples/corpus/`` and never needs the source datasets.

Sources (BEIR-format copies, see ``examples/ATTRIBUTION.md``):

* ``scifact/corpus.jsonl.gz``   English biomedical abstracts  -> ``en/``
* ``cmrc2018-dev/corpus.jsonl`` Chinese Wikipedia paragraphs  -> ``zh/``
* ``xquad-zh-en/corpus.jsonl``  parallel zh/en paragraphs     -> ``mixed/``

The selection is fixed (the first documents in file order) and every output
is byte-for-byte reproducible: PDF creation dates, DOCX core properties and
ZIP member timestamps are pinned, and there is no randomness.

Usage::

    .venv/bin/python examples/build_corpus.py [--datasets DIR] [--out DIR]

The output directory is deleted and rebuilt on every run.
"""

from __future__ import annotations

import argparse
import gzip
import html
import io
import json
import re
import shutil
import sys
import textwrap
import unicodedata
import zipfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

Doc = dict[str, str]

HERE = Path(__file__).resolve().parent
DEFAULT_DATASETS = HERE.parent.parent / "shared" / "datasets"
DEFAULT_OUT = HERE / "corpus"

# One fixed timestamp for every generated artefact (PDF /CreationDate,
# DOCX core properties, ZIP member dates).
FIXED_DATE = datetime(2024, 1, 1, 0, 0, 0, tzinfo=timezone.utc)
ZIP_DATE = (2024, 1, 1, 0, 0, 0)

# --------------------------------------------------------------------------
# Fixed selection plan
# --------------------------------------------------------------------------

# scifact: the first 31 abstracts in file order.
EN_PLAN = [("md", 12), ("txt", 8), ("pdf", 6), ("html", 4)]  # 30 docs
EN_DRAFTS = 1  # the 31st abstract goes to _drafts/

# cmrc2018 dev: the first 31 paragraphs in file order.
ZH_PLAN = [("md", 10), ("txt", 8), ("docx", 8), ("html", 4)]  # 30 docs
ZH_DRAFTS = 1  # the 31st paragraph goes to _drafts/

# xquad: paragraph 0 of articles 0..4, each in English and Chinese.
# XQuAD drops the article titles; these are the SQuAD v1.1 article names
# (Super_Bowl_50, Warsaw, Normans, Nikola_Tesla,
# Computational_complexity_theory) and their common Chinese names.
XQUAD_ARTICLES = {
    0: ("Super Bowl 50", "第50届超级碗", "sports"),
    1: ("Warsaw", "华沙", "history"),
    2: ("Normans", "诺曼人", "history"),
    3: ("Nikola Tesla", "尼古拉·特斯拉", "biography"),
    4: ("Computational complexity theory", "计算复杂性理论", "computer-science"),
}

# Hand-assigned topics for the selected cmrc2018 paragraphs (by doc id).
ZH_TOPICS = {
    "DEV_0": "video-games",
    "DEV_1": "music",
    "DEV_2": "railways",
    "DEV_3": "railways",
    "DEV_4": "football",
    "DEV_5": "football",
    "DEV_6": "football",
    "DEV_7": "football",
    "DEV_8": "football",
    "DEV_9": "music",
    "DEV_10": "football",
    "DEV_11": "football",
    "DEV_12": "railways",
    "DEV_13": "football",
    "DEV_14": "transport",
    "DEV_15": "geography",
    "DEV_16": "education",
    "DEV_17": "railways",
    "DEV_18": "railways",
    "DEV_19": "chemistry",
    "DEV_20": "history",
    "DEV_21": "railways",
    "DEV_22": "history",
    "DEV_24": "geography",
    "DEV_25": "history",
    "DEV_27": "history",
    "DEV_28": "zoology",
    "DEV_29": "finance",
    "DEV_30": "politics",
    "DEV_31": "religion",
    "DEV_32": "religion",
}

# Markdown files marked RESTRICTED in their front matter (source ids).
RESTRICTED_FRONT_MATTER = {"scifact:18670", "scifact:70115", "cmrc:DEV_5"}

# Sidecar metadata: "<file>.meta.json" next to the document (source ids).
SIDECARS = {
    # a .txt whose only sensitivity marker is the sidecar
    "scifact:97884": {"sensitivity": "RESTRICTED", "topic": "biomedical"},
    "scifact:103007": {"entity": "United Kingdom", "period": "1990"},
    "scifact:120626": {"entity": "Obesity", "topic": "biomedical"},
    "scifact:159469": {"entity": "HTRF", "topic": "biomedical"},
    "cmrc:DEV_10": {"entity": "苏镜宇", "period": "2018"},
    "cmrc:DEV_14": {"entity": "莱索托", "period": "2018", "topic": "transport"},
    "cmrc:DEV_19": {"entity": "环氧氯丙烷", "period": "2018"},
}

STOPWORDS = {
    "a",
    "an",
    "and",
    "are",
    "as",
    "at",
    "by",
    "for",
    "from",
    "in",
    "into",
    "is",
    "of",
    "on",
    "or",
    "the",
    "to",
    "with",
}


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


def load_jsonl(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def clean(text: str) -> str:
    """Strip BOMs and surrounding whitespace, collapse runs of blanks."""
    text = text.replace("\ufeff", "")
    text = re.sub(r"[ \t]+", " ", text)
    return text.strip()


def slug(title: str, max_words: int = 3) -> str:
    words = re.findall(r"[a-z0-9]+", title.lower())
    picked = [w for w in words if w not in STOPWORDS][:max_words]
    return "-".join(picked) or "untitled"


def en_sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z(\[])", text)
    return [p.strip() for p in parts if p.strip()]


def zh_sentences(text: str) -> list[str]:
    parts = re.findall(r"[^。！？]*[。！？]|[^。！？]+$", text)
    return [p.strip() for p in parts if p.strip()]


def group(sentences: list[str], n: int, joiner: str) -> list[str]:
    """Split sentences into at most n consecutive groups of similar length."""
    n = max(1, min(n, len(sentences)))
    total = sum(len(s) for s in sentences)
    groups: list[list[str]] = [[]]
    acc = 0
    for s in sentences:
        boundary = total * len(groups) / n
        if groups[-1] and acc >= boundary and len(groups) < n:
            groups.append([])
        groups[-1].append(s)
        acc += len(s)
    return [joiner.join(g) for g in groups]


def en_paragraphs(text: str) -> list[str]:
    sents = en_sentences(text)
    return group(sents, 3 if len(text) > 1200 else 2, " ")


def zh_paragraphs(text: str) -> list[str]:
    """2-4 paragraphs split at sentence-final punctuation."""
    sents = zh_sentences(text)
    n = 2 if len(text) < 350 else 3 if len(text) < 600 else 4
    return group(sents, n, "")


_YAML_PLAIN = re.compile(r"[^\W\d_][\w .()/\u00b7-]*(?<! )")
_YAML_KEYWORDS = {"y", "n", "yes", "no", "true", "false", "on", "off", "null"}


def yaml_str(value: str) -> str:
    """Plain scalar when unambiguous, else a double-quoted one (a JSON
    string is a valid YAML double-quoted scalar)."""
    if _YAML_PLAIN.fullmatch(value) and value.lower() not in _YAML_KEYWORDS:
        return value
    return json.dumps(value, ensure_ascii=False)


def front_matter(fields: dict[str, str]) -> str:
    lines = ["---"]
    for key, value in fields.items():
        if isinstance(value, str):
            lines.append(f"{key}: {yaml_str(value)}")
        else:
            lines.append(f"{key}: {value}")
    lines.append("---")
    return "\n".join(lines) + "\n"


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)


def write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def write_sidecar(path: Path, meta: dict[str, str]) -> None:
    sidecar = path.with_name(path.name + ".meta.json")
    write_text(sidecar, json.dumps(meta, ensure_ascii=False, indent=2) + "\n")


# --- latin-1 for the PDF core font -----------------------------------------

LATIN1_MAP = {
    "\u2013": "-",
    "\u2014": "-",
    "\u2010": "-",
    "\u2011": "-",
    "\u2212": "-",
    "\u2018": "'",
    "\u2019": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u2026": "...",
    "\u223c": "~",
    "\u2248": "~",
    "\u2264": "<=",
    "\u2265": ">=",
    "\u2022": "*",
    "\u2009": " ",
    "\u202f": " ",
    "\u00a0": " ",
    "\u2032": "'",
    "\u03b1": "alpha",
    "\u03b2": "beta",
    "\u03b3": "gamma",
    "\u03b4": "delta",
    "\u03ba": "kappa",
    "\u03bb": "lambda",
    "\u03bc": "micro",
    "\u03c9": "omega",
    "\u0394": "Delta",
    "\u03c3": "sigma",
    "\u03c4": "tau",
    "\u03b5": "epsilon",
}


def to_latin1(text: str) -> str:
    out = []
    for ch in text:
        if ord(ch) < 256:
            out.append(ch)
        elif ch in LATIN1_MAP:
            out.append(LATIN1_MAP[ch])
        else:
            base = unicodedata.normalize("NFKD", ch)
            base = "".join(c for c in base if ord(c) < 256)
            out.append(base)  # dropped if nothing latin-1 remains
    return "".join(out)


# --------------------------------------------------------------------------
# Writers
# --------------------------------------------------------------------------


def markdown_doc(doc: Doc, fields: dict[str, str], paragraphs: list[str], restricted: bool) -> str:
    fields = {"title": doc["title"], **fields}
    if restricted:
        fields["sensitivity"] = "RESTRICTED"
    body = "\n\n".join(paragraphs)
    return f"{front_matter(fields)}\n# {doc['title']}\n\n{body}\n"


def en_markdown(doc: Doc, restricted: bool) -> str:
    fields = {
        "topic": "biomedical",
        "language": "en",
        "source": "scifact",
        "scifact_id": doc["_id"],
    }
    return markdown_doc(doc, fields, en_paragraphs(doc["text"]), restricted)


def en_txt(doc: Doc) -> str:
    paras = [textwrap.fill(p, width=78) for p in en_paragraphs(doc["text"])]
    return doc["title"] + "\n\n" + "\n\n".join(paras) + "\n"


def html_page(title: str, paragraphs: list[str], lang: str, meta: dict[str, str]) -> str:
    head_meta = "".join(
        f'    <meta name="{html.escape(k)}" content="{html.escape(v)}">\n' for k, v in meta.items()
    )
    paras = "".join(f"    <p>{html.escape(p)}</p>\n" for p in paragraphs)
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="{lang}">\n'
        "  <head>\n"
        '    <meta charset="utf-8">\n'
        f"    <title>{html.escape(title)}</title>\n"
        f"{head_meta}"
        "  </head>\n"
        "  <body>\n"
        "    <article>\n"
        f"    <h1>{html.escape(title)}</h1>\n"
        f"{paras}"
        "    </article>\n"
        "  </body>\n"
        "</html>\n"
    )


def en_pdf(doc: Doc) -> bytes:
    """Two-page PDF: title + first half of the abstract on page 1, the
    remainder on page 2, with 'Page n of N' footers."""
    from fpdf import FPDF
    from fpdf.enums import XPos, YPos

    title = to_latin1(doc["title"])
    sents = [to_latin1(s) for s in en_sentences(doc["text"])]
    if len(sents) < 2:  # make sure page 2 has text
        words = " ".join(sents).split()
        half = max(1, len(words) // 2)
        sents = [" ".join(words[:half]), " ".join(words[half:])]
    half = len(sents) // 2 if len(sents) % 2 == 0 else len(sents) // 2 + 1
    first, second = " ".join(sents[:half]), " ".join(sents[half:])

    class PDF(FPDF):
        def footer(self) -> None:
            self.set_y(-15)
            self.set_font("Helvetica", "I", 9)
            self.cell(0, 10, f"SciFact {doc['_id']} - Page {self.page_no()} of {{nb}}", align="C")

    pdf = PDF(format="A4")
    pdf.set_creation_date(FIXED_DATE)
    pdf.set_title(title)
    pdf.set_author("SciFact corpus (allenai/scifact), via BEIR")
    pdf.set_subject("biomedical")
    pdf.set_creator("ragspine examples/build_corpus.py")
    pdf.set_auto_page_break(auto=True, margin=20)

    pdf.add_page()
    pdf.set_font("Helvetica", "B", 15)
    pdf.multi_cell(0, 8, title, new_x=XPos.LMARGIN, new_y=YPos.NEXT)
    pdf.ln(2)
    pdf.set_font("Helvetica", "I", 10)
    pdf.cell(
        0,
        6,
        f"SciFact abstract {doc['_id']} - topic: biomedical",
        new_x=XPos.LMARGIN,
        new_y=YPos.NEXT,
    )
    pdf.ln(4)
    pdf.set_font("Helvetica", "B", 12)
    pdf.cell(0, 7, "Abstract", new_x=XPos.LMARGIN, new_y=YPos.NEXT)
    pdf.set_font("Helvetica", "", 11)
    pdf.multi_cell(0, 6, first, new_x=XPos.LMARGIN, new_y=YPos.NEXT)

    pdf.add_page()
    pdf.set_font("Helvetica", "B", 12)
    pdf.cell(0, 7, "Abstract (continued)", new_x=XPos.LMARGIN, new_y=YPos.NEXT)
    pdf.set_font("Helvetica", "", 11)
    pdf.multi_cell(0, 6, second, new_x=XPos.LMARGIN, new_y=YPos.NEXT)
    return bytes(pdf.output())


def normalize_zip(data: bytes) -> bytes:
    """Rewrite a ZIP with fixed member timestamps and attributes."""
    src = zipfile.ZipFile(io.BytesIO(data))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            zi = zipfile.ZipInfo(info.filename, date_time=ZIP_DATE)
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.external_attr = 0o644 << 16
            zi.create_system = 0
            dst.writestr(zi, src.read(info.filename))
    return buf.getvalue()


def zh_docx(doc: Doc, topic: str) -> bytes:
    from docx import Document

    d = Document()
    cp = d.core_properties
    cp.title = doc["title"]
    cp.subject = topic
    cp.author = "CMRC 2018 (ymcui/cmrc2018)"
    cp.last_modified_by = "ragspine examples/build_corpus.py"
    cp.language = "zh-CN"
    cp.keywords = f"cmrc2018 {doc['_id']}"
    cp.comments = "Chinese Wikipedia paragraph, CC BY-SA 4.0"
    cp.created = FIXED_DATE.replace(tzinfo=None)
    cp.modified = FIXED_DATE.replace(tzinfo=None)
    cp.revision = 1
    d.add_heading(doc["title"], level=1)
    for para in zh_paragraphs(doc["text"]):
        d.add_paragraph(para)
    buf = io.BytesIO()
    d.save(buf)
    return normalize_zip(buf.getvalue())


def zh_markdown(doc: Doc, topic: str, restricted: bool) -> str:
    fields = {"topic": topic, "language": "zh", "source": "cmrc2018", "cmrc_id": doc["_id"]}
    return markdown_doc(doc, fields, zh_paragraphs(doc["text"]), restricted)


def zh_txt(doc: Doc) -> str:
    return doc["title"] + "\n\n" + "\n\n".join(zh_paragraphs(doc["text"])) + "\n"


# --------------------------------------------------------------------------
# Build
# --------------------------------------------------------------------------


def build(datasets: Path, out: Path) -> dict[str, list[str]]:
    produced: dict[str, list[str]] = {"scifact": [], "cmrc2018": [], "xquad": []}

    def emit(kind: str, rel: str, content: str | bytes, source_key: str) -> Path:
        path = out / rel
        if isinstance(content, bytes):
            write_bytes(path, content)
        else:
            write_text(path, content)
        produced[kind].append(rel)
        if source_key in SIDECARS:
            write_sidecar(path, SIDECARS[source_key])
            produced[kind].append(rel + ".meta.json")
        return path

    # ---- en/: scifact ----------------------------------------------------
    scifact = load_jsonl(datasets / "scifact" / "corpus.jsonl.gz")
    scifact = [
        {"_id": d["_id"], "title": clean(d["title"]).rstrip(" "), "text": clean(d["text"])}
        for d in scifact
        if d.get("text", "").strip()
    ]
    need = sum(n for _, n in EN_PLAN) + EN_DRAFTS
    picked = scifact[:need]
    i = 0
    for fmt, count in EN_PLAN:
        for doc in picked[i : i + count]:
            key = f"scifact:{doc['_id']}"
            content: str | bytes
            stem = f"en/scifact-{doc['_id']}-{slug(doc['title'])}"
            if fmt == "md":
                content = en_markdown(doc, key in RESTRICTED_FRONT_MATTER)
            elif fmt == "txt":
                content = en_txt(doc)
            elif fmt == "pdf":
                content = en_pdf(doc)
            else:
                content = html_page(
                    doc["title"],
                    en_paragraphs(doc["text"]),
                    "en",
                    {"topic": "biomedical", "source": "scifact", "scifact_id": doc["_id"]},
                )
            emit("scifact", f"{stem}.{fmt}", content, key)
        i += count
    for doc in picked[i : i + EN_DRAFTS]:
        emit(
            "scifact",
            f"_drafts/draft-scifact-{doc['_id']}-{slug(doc['title'])}.txt",
            "DRAFT - not for publication\n\n" + en_txt(doc),
            f"scifact:{doc['_id']}",
        )

    # ---- zh/: cmrc2018 ---------------------------------------------------
    cmrc = load_jsonl(datasets / "cmrc2018-dev" / "corpus.jsonl")
    cmrc = [
        {"_id": d["_id"], "title": clean(d["title"]), "text": clean(d["text"])}
        for d in cmrc
        if d.get("text", "").strip()
    ]
    need = sum(n for _, n in ZH_PLAN) + ZH_DRAFTS
    picked = cmrc[:need]
    i = 0
    for fmt, count in ZH_PLAN:
        for doc in picked[i : i + count]:
            key = f"cmrc:{doc['_id']}"
            topic = ZH_TOPICS[doc["_id"]]
            num = doc["_id"].split("_", 1)[1]
            stem = f"zh/cmrc-dev-{num}"
            if fmt == "md":
                content = zh_markdown(doc, topic, key in RESTRICTED_FRONT_MATTER)
            elif fmt == "txt":
                content = zh_txt(doc)
            elif fmt == "docx":
                content = zh_docx(doc, topic)
            else:
                content = html_page(
                    doc["title"],
                    zh_paragraphs(doc["text"]),
                    "zh",
                    {"topic": topic, "source": "cmrc2018", "cmrc_id": doc["_id"]},
                )
            emit("cmrc2018", f"{stem}.{fmt}", content, key)
        i += count
    for doc in picked[i : i + ZH_DRAFTS]:
        num = doc["_id"].split("_", 1)[1]
        emit(
            "cmrc2018",
            f"_drafts/draft-cmrc-dev-{num}.txt",
            "草稿（未发布）\n\n" + zh_txt(doc),
            f"cmrc:{doc['_id']}",
        )

    # ---- mixed/: xquad zh + en ------------------------------------------
    xquad = {d["_id"]: d for d in load_jsonl(datasets / "xquad-zh-en" / "corpus.jsonl")}
    for art, (en_title, zh_title, topic) in XQUAD_ARTICLES.items():
        pid = f"p{art}-0"
        for lang, title in (("en", en_title), ("zh", zh_title)):
            src = xquad[f"{lang}-{pid}"]
            other = "zh" if lang == "en" else "en"
            fields = {
                "title": title,
                "topic": topic,
                "language": lang,
                "source": "xquad",
                "xquad_id": src["_id"],
                "translation_of": f"mixed/xquad-{pid}-{other}.md",
            }
            text = clean(src["text"])
            paras = en_paragraphs(text) if lang == "en" else zh_paragraphs(text)
            body = "\n\n".join(paras)
            emit(
                "xquad",
                f"mixed/xquad-{pid}-{lang}.md",
                f"{front_matter(fields)}\n# {title}\n\n{body}\n",
                f"xquad:{src['_id']}",
            )

    return produced


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--datasets",
        type=Path,
        default=DEFAULT_DATASETS,
        help=f"BEIR datasets directory (default: {DEFAULT_DATASETS})",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"output directory, rebuilt from scratch (default: {DEFAULT_OUT})",
    )
    args = ap.parse_args(argv)

    out = args.out.resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    produced = build(args.datasets, out)

    total = 0
    for kind, files in produced.items():
        docs = [f for f in files if not f.endswith(".meta.json")]
        print(f"{kind}: {len(docs)} documents, {len(files) - len(docs)} sidecars")
        total += len(docs)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"total: {total} documents, {size / 1024:.1f} KiB in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
