"""User-facing errors: each names the bad input so the caller can fix it (R6)."""

from __future__ import annotations


class RagspineError(Exception):
    """Base of every error ragspine raises on purpose."""


class InvalidArgumentError(RagspineError, ValueError):
    """A caller passed a value ragspine cannot honour (negative top_k, unknown mode, ...)."""


class FilterError(InvalidArgumentError):
    """A metadata filter is malformed; raised instead of ever widening a search (R4)."""


class LoaderError(RagspineError):
    """A file could not be read or parsed; the message names the file."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class KnowledgeBaseError(RagspineError):
    """A knowledge-base directory is missing, foreign or incompatible with the settings."""
