"""Which files an ingest reads: directory walk with include/exclude globs, and sidecars."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ragspine.documents.loaders import supported_suffixes
from ragspine.errors import LoaderError

SIDECAR_SUFFIX = ".meta.json"


@dataclass(frozen=True)
class FileToIngest:
    path: Path
    doc_id: str  # stable: the ingest root's name plus the path below it, with '/'


def _matches(relative: str, patterns: Sequence[str]) -> bool:
    path = PurePosixPath(relative)
    for pattern in patterns:
        if fnmatch.fnmatch(relative, pattern) or path.match(pattern):
            return True
        # "dir/**" and "**/x" should also match at the top level and through any depth
        if pattern.endswith("/**") and (relative + "/").startswith(pattern[:-2]):
            return True
        if pattern.startswith("**/") and fnmatch.fnmatch(path.name, pattern[3:]):
            return True
    return False


def iter_files(
    paths: Iterable[str | Path],
    *,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> list[FileToIngest]:
    """Files under ``paths`` that a loader reads, sorted, minus sidecars and excluded globs.

    Globs match the path relative to the directory given (``_drafts/**``, ``*.pdf``); a missing
    path is a :class:`LoaderError`.
    """
    suffixes = set(supported_suffixes())
    found: dict[str, FileToIngest] = {}
    for raw in paths:
        root = Path(raw)
        if root.is_file():
            found.setdefault(root.name, FileToIngest(root, root.name))
            continue
        if not root.is_dir():
            raise LoaderError(str(root), "no such file or directory")
        prefix = root.resolve().name
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            relative = path.relative_to(root).as_posix()
            if path.name.endswith(SIDECAR_SUFFIX) or path.suffix.lower() not in suffixes:
                continue
            if any(part.startswith(".") for part in path.relative_to(root).parts):
                continue
            if include and not _matches(relative, include):
                continue
            if exclude and _matches(relative, exclude):
                continue
            doc_id = f"{prefix}/{relative}" if prefix else relative
            found.setdefault(doc_id, FileToIngest(path, doc_id))
    return [found[k] for k in sorted(found)]


def read_sidecar(path: Path) -> dict[str, Any]:
    """Metadata from ``NAME.meta.json`` (or ``STEM.meta.json``) beside the file, if present."""
    for candidate in (path.with_name(path.name + SIDECAR_SUFFIX), path.with_suffix(SIDECAR_SUFFIX)):
        if candidate.is_file():
            try:
                data = json.loads(candidate.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise LoaderError(str(candidate), f"sidecar is not valid JSON: {exc}") from exc
            if not isinstance(data, dict):
                raise LoaderError(str(candidate), "sidecar must hold a JSON object")
            return data
    return {}
