"""Sensitivity labels. One constant guards every exit that could leak RESTRICTED text (R1)."""

from __future__ import annotations

RESTRICTED_SENSITIVITY = "RESTRICTED"
DEFAULT_SENSITIVITY = "PUBLIC"


def normalize_sensitivity(label: object) -> str:
    text = str(label).strip().upper() if label is not None else ""
    return text or DEFAULT_SENSITIVITY


def is_restricted(label: object) -> bool:
    return normalize_sensitivity(label) == RESTRICTED_SENSITIVITY


def merge_sensitivity(*labels: object) -> str:
    """The last label given wins, except that RESTRICTED from any source is never downgraded."""
    given = [normalize_sensitivity(x) for x in labels if x is not None and str(x).strip()]
    if RESTRICTED_SENSITIVITY in given:
        return RESTRICTED_SENSITIVITY
    return given[-1] if given else DEFAULT_SENSITIVITY
