"""Deterministic multi-query rewriting from a glossary (R40): no model, same query ⇒ same queries.

A glossary names groups of interchangeable terms — an entity and its aliases, a metric and its
synonyms, a Chinese term and its English one. A query that mentions a term is rewritten once per
other term of its group; the original query always comes first.

File format (YAML or JSON)::

    entities:
      - {name: ACME, aliases: [Acme Corp, 艾克米]}
    metrics:
      - {name: revenue, synonyms: [sales, turnover]}
    pairs:                      # zh/en (or any two-way) equivalents
      - [营收, revenue]
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragspine.errors import InvalidArgumentError
from ragspine.retrieval.lexical.tokenizer import has_cjk
from ragspine.retrieval.query.files import read_mapping

DEFAULT_MAX_QUERIES = 5


@dataclass(frozen=True)
class Glossary:
    """Groups of interchangeable terms, in the order the file gives them."""

    groups: tuple[tuple[str, ...], ...]

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str = "glossary") -> Glossary:
        groups: list[tuple[str, ...]] = []
        for section, alias_key in (("entities", "aliases"), ("metrics", "synonyms")):
            for i, entry in enumerate(data.get(section) or []):
                if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
                    raise InvalidArgumentError(f"{source}: {section}[{i}] needs a 'name'")
                groups.append((entry["name"], *_terms(entry.get(alias_key) or [], source)))
        for i, pair in enumerate(data.get("pairs") or []):
            if not isinstance(pair, Sequence) or isinstance(pair, str) or len(pair) < 2:
                raise InvalidArgumentError(f"{source}: pairs[{i}] must list two or more terms")
            groups.append(_terms(pair, source))
        unknown = set(data) - {"entities", "metrics", "pairs"}
        if unknown:
            raise InvalidArgumentError(f"{source}: unknown sections {sorted(unknown)}")
        cleaned = tuple(tuple(dict.fromkeys(t.strip() for t in g if t.strip())) for g in groups)
        return cls(tuple(g for g in cleaned if len(g) > 1))


def _terms(values: Any, source: str) -> tuple[str, ...]:
    if not isinstance(values, Sequence) or isinstance(values, str):
        raise InvalidArgumentError(f"{source}: expected a list of terms, got {values!r}")
    if not all(isinstance(v, str) for v in values):
        raise InvalidArgumentError(f"{source}: every term must be text: {values!r}")
    return tuple(values)


def load_glossary(path: str | Path) -> Glossary:
    """A glossary from a ``.json``, ``.yaml`` or ``.yml`` file, or a clear error."""
    return Glossary.from_mapping(read_mapping(path, "glossary"), str(path))


def term_pattern(term: str) -> re.Pattern[str]:
    """Where ``term`` occurs: as whole words for Latin script, anywhere for CJK."""
    escaped = re.escape(term)
    return re.compile(escaped if has_cjk(term) else rf"(?<!\w){escaped}(?!\w)", re.IGNORECASE)


class GlossaryQueryRewriter:
    """``rewrite(query)`` → the query, then one rewrite per glossary alternative of each term it
    mentions (terms in the order they appear in the query, longer terms first at a position),
    at most ``max_queries`` in all, duplicates (ignoring case) dropped."""

    def __init__(self, glossary: Glossary, max_queries: int = DEFAULT_MAX_QUERIES) -> None:
        if max_queries < 1:
            raise InvalidArgumentError(f"max_queries must be >= 1, got {max_queries}")
        self.glossary = glossary
        self.max_queries = max_queries
        self._terms = [
            (term_pattern(term), group)
            for group in glossary.groups
            for term in sorted(group, key=lambda t: (-len(t), t))
        ]

    def rewrite(self, query: str) -> list[str]:
        found: list[tuple[int, int, re.Match[str], tuple[str, ...]]] = []
        for pattern, group in self._terms:
            for match in pattern.finditer(query):
                found.append((match.start(), -(match.end() - match.start()), match, group))
        found.sort(key=lambda f: (f[0], f[1]))
        queries = [query]
        taken_until = -1
        for start, _, match, group in found:
            if start < taken_until:
                continue  # inside a longer term already rewritten
            taken_until = match.end()
            for alternative in group:
                if alternative.lower() != match.group(0).lower():
                    queries.append(query[: match.start()] + alternative + query[match.end() :])
        return first_of_each(queries)[: self.max_queries]


def first_of_each(queries: Sequence[str]) -> list[str]:
    """``queries`` without repeats (ignoring case and surrounding space), first one kept."""
    seen: set[str] = set()
    unique = []
    for query in queries:
        key = " ".join(query.lower().split())
        if key and key not in seen:
            seen.add(key)
            unique.append(query)
    return unique
