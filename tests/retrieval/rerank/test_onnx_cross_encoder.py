"""The local ONNX cross-encoder (R51) through its real loader, on a tiny cross-encoder graph and
tokenizer built here (no cross-encoder ships in a package), plus a run on a real model when
``RAGSPINE_CROSS_ENCODER_DIR`` names one."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from ragspine.errors import InvalidArgumentError
from ragspine.retrieval.rerank.cross_encoder import make_reranker
from ragspine.retrieval.rerank.onnx_cross_encoder import OnnxCrossEncoder, relevance
from tests.retrieval.rerank.helpers import ids, snippet

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

# read before the test fixtures clear RAGSPINE_* variables
REAL_MODEL = os.environ.get("RAGSPINE_CROSS_ENCODER_DIR")
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "what", "is", "gold", "relevant", "noise", "secret"]
WEIGHT = {"gold": 2.0, "relevant": 1.0}


def build_cross_encoder(directory: Path, *, two_classes: bool = False) -> Path:
    """A BERT-shaped sequence classifier: logit = sum of per-token weights over the passage
    (segment 1) tokens, so the scores are known exactly."""
    from onnx import TensorProto, helper
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(VOCAB)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(directory / "tokenizer.json"))

    weights = np.array([[WEIGHT.get(w, 0.0)] for w in VOCAB], dtype=np.float32)
    ints = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"])
            for n in ("input_ids", "attention_mask", "token_type_ids")]  # fmt: skip
    nodes = [
        helper.make_node("Gather", ["weights", "input_ids"], ["gathered"]),
        helper.make_node("Squeeze", ["gathered", "last"], ["per_token"]),
        helper.make_node("Cast", ["attention_mask"], ["mask"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["token_type_ids"], ["segment"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["per_token", "mask"], ["masked"]),
        helper.make_node("Mul", ["masked", "segment"], ["passage"]),
        helper.make_node("ReduceSum", ["passage", "sequence_axis"], ["logit"], keepdims=1),
    ]
    if two_classes:  # [irrelevant, relevant] = [0, logit]
        nodes.append(helper.make_node("Mul", ["logit", "zero"], ["zeros"]))
        nodes.append(helper.make_node("Concat", ["zeros", "logit"], ["logits"], axis=1))
    else:
        nodes.append(helper.make_node("Identity", ["logit"], ["logits"]))
    graph = helper.make_graph(
        nodes,
        "tiny-cross-encoder",
        ints,
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", None])],
        initializer=[
            helper.make_tensor("weights", TensorProto.FLOAT, weights.shape, weights.ravel()),
            helper.make_tensor("last", TensorProto.INT64, [1], [2]),
            helper.make_tensor("sequence_axis", TensorProto.INT64, [1], [1]),
            helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(directory / "model.onnx"))
    return directory


def test_r51_the_loader_scores_pairs_and_orders_by_relevance(tmp_path: Path) -> None:
    encoder = OnnxCrossEncoder(build_cross_encoder(tmp_path / "ce"), batch_size=2)
    texts = ["noise noise", "gold relevant", "relevant", "gold secret", "what is noise gold"]
    results = [snippet(i, t, "RESTRICTED" if i == 3 else "PUBLIC") for i, t in enumerate(texts)]
    scores = encoder.score("what is gold", results)
    # the query's own "gold" is segment 0 and does not count: only the passage does
    assert np.allclose(scores, 1 / (1 + np.exp(-np.array([0.0, 3.0, 1.0, 2.0, 2.0]))))
    out = encoder.rerank("what is gold", results)
    assert ids(out) == ["c001", "c004", "c002", "c003", "c000"]  # RESTRICTED stays 4th
    assert out[3].scores.get("rerank") is None


def test_r51_two_class_heads_give_the_probability_of_relevant(tmp_path: Path) -> None:
    encoder = OnnxCrossEncoder(build_cross_encoder(tmp_path / "ce2", two_classes=True))
    scores = encoder.score("q", [snippet(0, "gold"), snippet(1, "noise")])
    assert np.allclose(scores, [1 / (1 + np.exp(-2.0)), 0.5])
    assert np.allclose(relevance(np.array([0.0, 3.0])), 1 / (1 + np.exp(-np.array([0.0, 3.0]))))


def test_r51_make_reranker_reads_the_model_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = build_cross_encoder(tmp_path / "onnx-export")
    (model / "onnx").mkdir()
    (model / "model.onnx").rename(model / "onnx" / "model.onnx")  # the layout HF repos use
    monkeypatch.setenv("RAGSPINE_CROSS_ENCODER_DIR", str(model))
    for spec in ("ce", "cross_encoder", "auto"):
        chain = make_reranker(spec)
        assert chain is not None and chain.name == "cross_encoder"
    monkeypatch.setenv("RAGSPINE_RERANKER", "ce")
    assert make_reranker() is not None


def test_r6_a_missing_or_broken_model_directory_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(InvalidArgumentError, match="RAGSPINE_CROSS_ENCODER_DIR"):
        make_reranker("ce")
    assert make_reranker("auto") is None  # auto without a model: no reranking
    with pytest.raises(InvalidArgumentError, match=r"model\.onnx"):
        OnnxCrossEncoder(tmp_path)
    (tmp_path / "model.onnx").write_bytes(b"")
    with pytest.raises(InvalidArgumentError, match=r"tokenizer\.json"):
        OnnxCrossEncoder(tmp_path)


@pytest.mark.skipif(
    REAL_MODEL is None, reason="RAGSPINE_CROSS_ENCODER_DIR does not name a real cross-encoder"
)
def test_r51_a_real_cross_encoder_prefers_the_answer() -> None:
    encoder = OnnxCrossEncoder(str(REAL_MODEL))
    results = [snippet(0, "Paris is known for its museums and cafes."),
               snippet(1, "The capital of France is Paris.")]  # fmt: skip
    assert ids(encoder.rerank("What is the capital of France?", results))[0] == "c001"
