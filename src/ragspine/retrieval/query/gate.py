"""The safety gate (R45): a generated query that targets the deny-list never runs.

Query transforms let a model write queries; a rewritten query that names a competitor or
carries an internal code could leak through logs or an outbound search. The gate checks every
generated query against configured entities, terms and regular expressions before retrieval; a
rejected query is dropped, logged and listed in the response (``rejected_queries``). The user's
own query is not a generated one and is not gated.

Deny-list file (YAML or JSON)::

    entities: [Globex, 竞争对手甲]
    terms: [project aurora]
    patterns: ['\\bQ[1-4]-internal\\b']
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ragspine.errors import InvalidArgumentError
from ragspine.retrieval.query.files import read_mapping
from ragspine.retrieval.query.glossary import term_pattern

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GateVerdict:
    allowed: tuple[str, ...]
    rejected: tuple[str, ...]


class SafetyGate:
    def __init__(
        self,
        entities: Iterable[str] = (),
        terms: Iterable[str] = (),
        patterns: Iterable[str] = (),
    ) -> None:
        self.rules: list[tuple[str, re.Pattern[str]]] = []
        for word in [*entities, *terms]:
            if word.strip():
                self.rules.append((word.strip(), term_pattern(word.strip())))
        for pattern in patterns:
            try:
                self.rules.append((pattern, re.compile(pattern, re.IGNORECASE)))
            except re.error as exc:
                raise InvalidArgumentError(f"deny-list pattern {pattern!r}: {exc}") from exc

    def reason(self, query: str) -> str | None:
        """Why ``query`` may not run, or None."""
        for label, rule in self.rules:
            if rule.search(query):
                return f"matches the deny-list entry {label!r}"
        return None

    def check(self, generated: Sequence[str]) -> GateVerdict:
        allowed, rejected = [], []
        for query in generated:
            why = self.reason(query)
            if why is None:
                allowed.append(query)
            else:
                log.warning("safety gate rejected a generated query (%s)", why)
                rejected.append(query)
        return GateVerdict(tuple(allowed), tuple(rejected))


def load_deny_list(path: str | Path) -> SafetyGate:
    """A gate from a deny-list file (``entities``, ``terms``, ``patterns``)."""
    data = read_mapping(path, "deny-list")
    if set(data) - {"entities", "terms", "patterns"}:
        raise InvalidArgumentError(f"deny-list {path}: only entities, terms and patterns")
    lists = {k: data.get(k) or [] for k in ("entities", "terms", "patterns")}
    for key, values in lists.items():
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise InvalidArgumentError(f"deny-list {path}: {key} must be a list of text")
    return SafetyGate(lists["entities"], lists["terms"], lists["patterns"])
