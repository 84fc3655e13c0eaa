"""R21 on real data: ragspine's BM25 equals bm25s (Robertson, same tokens), score for score."""

from __future__ import annotations

import numpy as np
import pytest

from ragspine.eval.beir import load_beir
from ragspine.retrieval.lexical.index import BM25Index
from ragspine.retrieval.lexical.tokenizer import Tokenizer
from tests.conftest import DATASETS

bm25s = pytest.importorskip("bm25s")


@pytest.mark.skipif(not (DATASETS / "cisi").is_dir(), reason="shared datasets absent")
def test_r21_scores_equal_bm25s_on_cisi() -> None:
    ds = load_beir(DATASETS / "cisi")
    tokenizer = Tokenizer(stemmer="english")
    ids = list(ds.corpus)
    texts = [f"{ds.corpus[d].title}\n\n{ds.corpus[d].text}" for d in ids]
    index = BM25Index(tokenizer)
    index.apply([(i, d, t) for i, (d, t) in enumerate(zip(ids, texts))], [], 1)
    peer = bm25s.BM25(k1=1.5, b=0.75, method="robertson")
    peer.index([tokenizer(t) for t in texts], show_progress=False)
    for query in list(ds.judged_queries().values()):
        tokens = [t for t in tokenizer(query) if t in peer.vocab_dict]
        theirs = peer.get_scores(tokens) * 2.5  # bm25s drops the constant (k1 + 1) factor
        ours = np.zeros(len(ids))
        slots, scores = index.score_slots(query)
        ours[slots] = scores
        np.testing.assert_allclose(ours, theirs, rtol=2e-5, atol=1e-4)
