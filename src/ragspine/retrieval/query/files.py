"""Reading the small YAML or JSON files that configure query transforms."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragspine.errors import InvalidArgumentError


def read_mapping(path: str | Path, what: str) -> Mapping[str, Any]:
    """The mapping in a ``.json`` or YAML file, or an error naming ``what`` and the file."""
    path = Path(path)
    try:
        raw = path.read_text(encoding="utf-8")
        if path.suffix == ".json":
            data = json.loads(raw)
        else:
            import yaml

            data = yaml.safe_load(raw)
    except Exception as exc:  # unreadable, or not JSON/YAML: the same clear error
        raise InvalidArgumentError(f"cannot read {what} {path}: {exc}") from exc
    if not isinstance(data, Mapping):
        raise InvalidArgumentError(f"{what} {path} must be a mapping of sections")
    return data
