"""``make_reranker``: specs, chains and their errors (R51–R55)."""

from __future__ import annotations

import pytest

from ragspine.errors import InvalidArgumentError
from ragspine.retrieval.rerank.cross_encoder import make_reranker


def test_r5_no_spec_means_no_reranker(monkeypatch: pytest.MonkeyPatch) -> None:
    assert make_reranker() is None
    assert make_reranker("none") is None and make_reranker("") is None
    monkeypatch.setenv("RAGSPINE_RERANKER", "embedding:deterministic")
    chain = make_reranker()
    assert chain is not None and chain.name == "embedding"
    assert make_reranker("none") is None  # the keyword wins over the environment


def test_r55_comma_separated_specs_chain_in_order() -> None:
    chain = make_reranker("embedding:deterministic, embedding:deterministic")
    assert chain is not None and len(chain.stages) == 2


@pytest.mark.parametrize("spec", ["colbert", "splade", "bogus", "ce;rm -rf"])
def test_r6_unknown_or_unavailable_rerankers_are_clear_errors(spec: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"reranker|model"):
        make_reranker(spec)


@pytest.mark.parametrize(("spec", "kind"), [("colbert", "ColBERT"), ("splade", "SPLADE")])
def test_r54_colbert_and_splade_say_no_model_installs_offline(spec: str, kind: str) -> None:
    with pytest.raises(InvalidArgumentError, match=rf"{kind} .*none ships in a package"):
        make_reranker(spec)
