"""Metadata predicates ``eq ne in nin gt gte lt lte between`` (R27, R4).

A filter is parsed once into :class:`MetadataFilter`, which compiles to SQL for the store's
pre-filter and also evaluates in Python (order-preserving filtering of result lists); both follow
one typed rule: numbers compare with numbers, strings with strings, and a field that is missing
or of another type never matches. Malformed filters raise :class:`FilterError` — a filter can
narrow a search, never silently widen it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragspine.errors import FilterError

OPERATORS = ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "between")
_FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
# Fields stored as columns of the chunk table; every other name is a metadata key.
COLUMN_FIELDS = ("doc_id", "chunk_id", "title", "source_path", "page", "sensitivity")
_SQL_OP = {"eq": "=", "ne": "!=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}

Scalar = str | int | float


def _kind(value: object) -> str | None:
    if isinstance(value, str):
        return "text"
    if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)):
        return "number"
    return None


@dataclass(frozen=True)
class Condition:
    field: str
    op: str
    value: Scalar | tuple[Scalar, ...]

    def matches(self, actual: object) -> bool:
        kind = _kind(actual)
        if kind is None:
            return False
        if self.op in ("in", "nin"):
            assert isinstance(self.value, tuple)
            found = any(_kind(v) == kind and v == actual for v in self.value)
            return found if self.op == "in" else not found
        if self.op == "between":
            assert isinstance(self.value, tuple)
            low, high = self.value
            return _kind(low) == kind and low <= actual <= high  # type: ignore[operator]
        if _kind(self.value) != kind:
            return False
        a, v = actual, self.value
        return {
            "eq": a == v,
            "ne": a != v,
            "gt": a > v,  # type: ignore[operator]
            "gte": a >= v,  # type: ignore[operator]
            "lt": a < v,  # type: ignore[operator]
            "lte": a <= v,  # type: ignore[operator]
        }[self.op]

    def to_sql(self) -> tuple[str, list[Scalar]]:
        if self.field in COLUMN_FIELDS:
            expr = self.field
            guards = {
                "text": f"typeof({expr}) = 'text'",
                "number": f"typeof({expr}) IN ('integer', 'real')",
            }
        else:
            path = f'$."{self.field}"'
            expr = f"json_extract(metadata, '{path}')"
            jtype = f"json_type(metadata, '{path}')"
            guards = {
                "text": f"{jtype} = 'text'",
                "number": f"{jtype} IN ('integer', 'real', 'true', 'false')",
            }
        if self.op in ("in", "nin"):
            assert isinstance(self.value, tuple)
            groups: dict[str, list[Scalar]] = {}
            for v in self.value:
                groups.setdefault(_kind(v) or "", []).append(v)
            parts = [
                f"({guards[k]} AND {expr} IN ({', '.join('?' * len(vs))}))"
                for k, vs in sorted(groups.items())
            ]
            params = [v for _, vs in sorted(groups.items()) for v in vs]
            found = " OR ".join(parts) if parts else "0"
            if self.op == "in":
                return f"({found})", params
            any_kind = f"({guards['text']} OR {guards['number']})"
            return f"({any_kind} AND NOT ({found}))", params
        if self.op == "between":
            assert isinstance(self.value, tuple)
            low, high = self.value
            return f"({guards[_kind(low) or '']} AND {expr} BETWEEN ? AND ?)", [low, high]
        assert not isinstance(self.value, tuple)
        kind = _kind(self.value) or ""
        return f"({guards[kind]} AND {expr} {_SQL_OP[self.op]} ?)", [self.value]


@dataclass(frozen=True)
class MetadataFilter:
    """An AND of conditions; the empty filter matches everything."""

    conditions: tuple[Condition, ...] = ()

    def matches(self, record: Mapping[str, Any]) -> bool:
        return all(c.matches(record.get(c.field)) for c in self.conditions)

    def to_sql(self) -> tuple[str, list[Scalar]]:
        if not self.conditions:
            return "1", []
        parts, params = [], []
        for c in self.conditions:
            sql, p = c.to_sql()
            parts.append(sql)
            params.extend(p)
        return " AND ".join(parts), params


def _scalar(field: str, op: str, value: object) -> Scalar:
    if _kind(value) is None:
        raise FilterError(
            f"filter {field!r} {op}: value {value!r} must be a string or a number "
            f"(got {type(value).__name__})"
        )
    return value  # type: ignore[return-value]


def _scalars(field: str, op: str, value: object) -> tuple[Scalar, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, set, frozenset)):
        raise FilterError(f"filter {field!r} {op}: expects a list of values, got {value!r}")
    items = [_scalar(field, op, v) for v in value]
    if isinstance(value, (set, frozenset)):
        items.sort(key=lambda v: (_kind(v) or "", v))
    return tuple(items)


def _condition(field: str, op: str, value: object) -> Condition:
    if op not in OPERATORS:
        raise FilterError(
            f"filter {field!r}: unknown operator {op!r}; use one of {', '.join(OPERATORS)}"
        )
    if op in ("in", "nin"):
        return Condition(field, op, _scalars(field, op, value))
    if op == "between":
        bounds = _scalars(field, op, value)
        if len(bounds) != 2:
            raise FilterError(f"filter {field!r} between: expects [low, high], got {value!r}")
        low, high = bounds
        if _kind(low) != _kind(high):
            raise FilterError(f"filter {field!r} between: bounds {low!r}, {high!r} differ in type")
        if low > high:  # type: ignore[operator]
            raise FilterError(f"filter {field!r} between: low {low!r} is above high {high!r}")
        return Condition(field, op, bounds)
    return Condition(field, op, _scalar(field, op, value))


def parse_filters(filters: Mapping[str, object] | MetadataFilter | None) -> MetadataFilter:
    """Parse ``{"entity": "ACME"}``, ``{"year": {"gte": 2020}}``, ``{"f": {"in": [...]}}``."""
    if filters is None:
        return MetadataFilter()
    if isinstance(filters, MetadataFilter):
        return filters
    if not isinstance(filters, Mapping):
        raise FilterError(f"filters must be a mapping of field to condition, got {filters!r}")
    conditions: list[Condition] = []
    for field in sorted(filters):
        if not isinstance(field, str) or not _FIELD_NAME.match(field):
            raise FilterError(
                f"filter field {field!r} is not a valid name (letters, digits, '_' or '-', "
                "not starting with a digit)"
            )
        spec = filters[field]
        if isinstance(spec, Mapping):
            if not spec:
                raise FilterError(f"filter {field!r}: empty condition")
            conditions.extend(_condition(field, str(op), spec[op]) for op in sorted(spec))
        else:
            conditions.append(_condition(field, "eq", spec))
    return MetadataFilter(tuple(conditions))


def parse_filter_expression(expression: str) -> tuple[str, str, object]:
    """CLI form ``FIELD:OP:VALUE`` or ``FIELD=VALUE``; list values comma-separated.

    The command line has no types, so a value that looks like a number compares as a number for
    ``gt gte lt lte between``, and matches the number or its text for ``eq ne in nin``
    (``period=2018`` finds ``2018`` and ``"2018"``).
    """
    if ":" in expression and (
        "=" not in expression or expression.index(":") < expression.index("=")
    ):
        parts = expression.split(":", 2)
        if len(parts) != 3 or not parts[0] or not parts[1]:
            raise FilterError(f"filter {expression!r}: expected FIELD:OP:VALUE or FIELD=VALUE")
        field, op, raw = parts
    elif "=" in expression:
        field, raw = expression.split("=", 1)
        op = "eq"
        if not field:
            raise FilterError(f"filter {expression!r}: missing field name before '='")
    else:
        raise FilterError(f"filter {expression!r}: expected FIELD:OP:VALUE or FIELD=VALUE")
    values = raw.split(",") if op in ("in", "nin", "between") else [raw]
    if any(not v.strip() for v in values):
        raise FilterError(f"filter {expression!r}: empty value")
    if op in ("gt", "gte", "lt", "lte"):
        return field, op, parse_scalar(raw)
    if op == "between":
        return field, op, [parse_scalar(v) for v in values]
    either: list[Scalar] = []
    for v in values:
        number = parse_scalar(v)
        either.extend([number, v] if number != v else [v])
    if op in ("eq", "ne") and len(either) == 1:
        return field, op, either[0]
    return field, {"eq": "in", "ne": "nin"}.get(op, op), either


def parse_scalar(raw: str) -> Scalar:
    """``"2020"`` → 2020, ``"1.5"`` → 1.5, anything else stays a string."""
    text = raw.strip()
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    if re.fullmatch(r"[+-]?(\d+\.\d*|\.\d+)([eE][+-]?\d+)?", text):
        return float(text)
    return raw


def filters_from_expressions(expressions: Iterable[str]) -> MetadataFilter:
    conditions: list[Condition] = []
    for expression in expressions:
        field, op, value = parse_filter_expression(expression)
        conditions.extend(parse_filters({field: {op: value}}).conditions)
    return MetadataFilter(tuple(conditions))
