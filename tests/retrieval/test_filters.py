from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragspine.errors import FilterError
from ragspine.retrieval.filters import (
    OPERATORS,
    filters_from_expressions,
    parse_filter_expression,
    parse_filters,
)

RECORDS: list[dict[str, Any]] = [
    {"year": 2019, "lang": "zh", "entity": "ACME"},
    {"year": 2020, "lang": "en", "entity": "ACME"},
    {"year": 2021, "lang": "en", "entity": "Other", "score": 1.5},
    {"year": "2022", "lang": "fr"},
    {"lang": "en", "flag": True},
]


def python_matches(filters: dict[str, Any]) -> list[int]:
    spec = parse_filters(filters)
    return [i for i, r in enumerate(RECORDS) if spec.matches(r)]


def sql_matches(filters: dict[str, Any], records: list[dict[str, Any]] = RECORDS) -> list[int]:
    spec = parse_filters(filters)
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (i INTEGER, metadata TEXT)")
    conn.executemany(
        "INSERT INTO t VALUES (?, ?)", [(i, json.dumps(r)) for i, r in enumerate(records)]
    )
    where, params = spec.to_sql()
    return [r[0] for r in conn.execute(f"SELECT i FROM t WHERE {where} ORDER BY i", params)]


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"entity": "ACME"}, [0, 1]),
        ({"entity": {"ne": "ACME"}}, [2]),
        ({"lang": {"in": ["zh", "fr"]}}, [0, 3]),
        ({"lang": {"nin": ["zh", "fr"]}}, [1, 2, 4]),
        ({"year": {"gt": 2019}}, [1, 2]),
        ({"year": {"gte": 2019, "lt": 2021}}, [0, 1]),
        ({"year": {"lte": 2020}}, [0, 1]),
        ({"year": {"between": [2020, 2021]}}, [1, 2]),
        ({"year": {"gte": "2020"}}, [3]),
        ({"lang": "en", "entity": "ACME"}, [1]),
        ({"score": {"gt": 1}}, [2]),
        ({"flag": True}, [4]),
        ({"missing": {"ne": "x"}}, []),
        ({}, [0, 1, 2, 3, 4]),
    ],
)
def test_r27_operators_in_python_and_sql_agree(
    filters: dict[str, Any], expected: list[int]
) -> None:
    assert python_matches(filters) == expected
    assert sql_matches(filters) == expected


def test_r27_all_nine_operators_exist() -> None:
    assert set(OPERATORS) == {"eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "between"}


scalars = st.one_of(
    st.integers(-5, 5),
    st.sampled_from(["a", "b", "zh", "中", ""]),
    st.floats(-3, 3, allow_nan=False),
)
records = st.lists(
    st.dictionaries(
        st.sampled_from(["f", "g"]), scalars | st.none() | st.lists(scalars, max_size=2)
    ),
    max_size=8,
)
conditions = st.one_of(
    scalars,
    st.fixed_dictionaries({}, optional={
        op: scalars for op in ("eq", "ne", "gt", "gte", "lt", "lte")
    }).filter(bool),
    st.builds(lambda op, v: {op: v}, st.sampled_from(["in", "nin"]), st.lists(scalars, max_size=3)),
    st.builds(lambda a, b: {"between": sorted([a, b])}, st.integers(-5, 5), st.integers(-5, 5)),
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(rows=records, filters=st.dictionaries(st.sampled_from(["f", "g"]), conditions, max_size=2))
def test_r4_r27_sql_prefilter_and_python_filter_never_disagree(
    rows: list[dict[str, Any]], filters: dict[str, Any]
) -> None:
    spec = parse_filters(filters)
    assert sql_matches(filters, rows) == [i for i, r in enumerate(rows) if spec.matches(r)]


@pytest.mark.parametrize(
    "bad",
    [
        {"year": {"like": 3}},
        {"year": {"in": 3}},
        {"year": {"in": "abc"}},
        {"year": {"between": [1]}},
        {"year": {"between": [3, 1]}},
        {"year": {"between": [1, "2"]}},
        {"year": {"eq": None}},
        {"year": {"eq": [1, 2]}},
        {"year": {"gt": float("nan")}},
        {"year": {}},
        {"bad field": 1},
        {"1year": 1},
        {"x'); DROP TABLE t;--": 1},
        ["not", "a", "mapping"],
    ],
)
def test_r4_malformed_filters_raise_instead_of_widening(bad: Any) -> None:
    with pytest.raises(FilterError):
        parse_filters(bad)


def test_r27_cli_expressions_parse_types_and_lists() -> None:
    assert parse_filter_expression("entity=ACME") == ("entity", "eq", "ACME")
    assert parse_filter_expression("year:gte:2020") == ("year", "gte", 2020)
    assert parse_filter_expression("lang:in:zh,en") == ("lang", "in", ["zh", "en"])
    assert parse_filter_expression("year:between:2019,2021") == ("year", "between", [2019, 2021])
    assert parse_filter_expression("url=http://x:1") == ("url", "eq", "http://x:1")
    assert parse_filter_expression("year=2022") == ("year", "in", [2022, "2022"])
    assert parse_filter_expression("year:nin:2022,x") == ("year", "nin", [2022, "2022", "x"])
    spec = filters_from_expressions(["year:gte:2019", "year:lt:2021", "lang=en"])
    assert [i for i, r in enumerate(RECORDS) if spec.matches(r)] == [1]
    spec = filters_from_expressions(["year=2022"])
    assert [i for i, r in enumerate(RECORDS) if spec.matches(r)] == [3]
    for bad in ("year", "year:gte", ":eq:1", "=x", "year:in:", "year:in:1,,2", "year=", "y:bad:1"):
        with pytest.raises(FilterError):
            filters_from_expressions([bad])
