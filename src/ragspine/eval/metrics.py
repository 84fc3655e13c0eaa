"""Ranking metrics from trec_eval itself (pytrec_eval), never hand-rolled."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

METRICS = ("ndcg@10", "recall@100", "mrr@10", "map@100")
_TREC = {"ndcg@10": "ndcg_cut_10", "recall@100": "recall_100", "map@100": "map_cut_100"}


def _ranked_scores(ids: Sequence[str]) -> dict[str, float]:
    """Scores that make trec_eval keep the given order exactly (it re-sorts by score)."""
    return {doc: float(len(ids) - i) for i, doc in enumerate(ids)}


def per_query_metrics(
    qrels: Mapping[str, Mapping[str, int]], run: Mapping[str, Sequence[str]]
) -> dict[str, dict[str, float]]:
    """nDCG@10, Recall@100, MRR@10 and MAP@100 for every judged query (0 when nothing was found)."""
    try:
        import pytrec_eval
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError("metrics need pytrec-eval-terrier: pip install 'ragspine[eval]'") from exc
    judged = {q: {d: int(g) for d, g in docs.items()} for q, docs in qrels.items()}
    full = {q: _ranked_scores(run.get(q, [])) for q in judged}
    top10 = {q: _ranked_scores(list(run.get(q, []))[:10]) for q in judged}
    deep = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut.10", "recall.100", "map_cut.100"})
    shallow = pytrec_eval.RelevanceEvaluator(judged, {"recip_rank"})
    deep_scores = deep.evaluate({q: r for q, r in full.items() if r})
    rr_scores = shallow.evaluate({q: r for q, r in top10.items() if r})
    results: dict[str, dict[str, float]] = {}
    for query in judged:
        found = deep_scores.get(query, {})
        results[query] = {name: float(found.get(key, 0.0)) for name, key in _TREC.items()}
        results[query]["mrr@10"] = float(rr_scores.get(query, {}).get("recip_rank", 0.0))
    return results


def mean_metrics(per_query: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    n = len(per_query)
    return {m: sum(q[m] for q in per_query.values()) / n if n else 0.0 for m in METRICS}
