"""Our metrics against trec_eval semantics, computed by hand on a graded fixture."""

from __future__ import annotations

import math

import pytest

from ragspine.eval.metrics import mean_metrics, per_query_metrics

QRELS = {"q1": {"a": 3, "b": 1, "c": 2, "z": 0}, "q2": {"x": 1}}
RUN = {"q1": ["b", "n1", "a", "n2", "z"], "q2": [f"n{i}" for i in range(12)] + ["x"]}


def dcg(gains: list[float]) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def test_r93_graded_ndcg_recall_mrr_map_follow_trec_eval() -> None:
    q = per_query_metrics(QRELS, RUN)
    # trec_eval ndcg_cut: linear gains, log2 discount, ideal from all judged grades
    assert q["q1"]["ndcg@10"] == pytest.approx(dcg([1, 0, 3, 0, 0]) / dcg([3, 2, 1]))
    assert q["q1"]["recall@100"] == pytest.approx(2 / 3)  # c never retrieved; z is not relevant
    assert q["q1"]["mrr@10"] == pytest.approx(1.0)
    assert q["q1"]["map@100"] == pytest.approx((1 / 1 + 2 / 3) / 3)
    # q2's only relevant document sits at rank 13: outside MRR@10 but inside Recall@100
    assert q["q2"]["mrr@10"] == 0.0 and q["q2"]["recall@100"] == 1.0
    assert q["q2"]["ndcg@10"] == 0.0


def test_r93_queries_without_results_count_as_zero() -> None:
    means = mean_metrics(per_query_metrics(QRELS, {"q1": RUN["q1"]}))
    alone = per_query_metrics(QRELS, {"q1": RUN["q1"]})["q1"]
    assert means["ndcg@10"] == pytest.approx(alone["ndcg@10"] / 2)
