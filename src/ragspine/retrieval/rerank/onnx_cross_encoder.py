"""A local cross-encoder on onnxruntime (R51): the query and each passage read together.

The model directory is what exporting a Hugging Face cross-encoder to ONNX gives
(``optimum-cli export onnx --task text-classification``, or the ``onnx/`` folder many model repos
ship): ``model.onnx`` (or ``onnx/model.onnx``) and ``tokenizer.json``. No cross-encoder ships in a
PyPI package, so the user points ``RAGSPINE_CROSS_ENCODER_DIR`` at one they have.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragspine.errors import InvalidArgumentError
from ragspine.retrieval.link.snippet import Snippet
from ragspine.retrieval.rerank.base import RerankError, ScoringReranker

MODEL_FILES = ("model.onnx", "onnx/model.onnx")


def find_model_file(directory: Path) -> Path:
    for name in MODEL_FILES:
        if (directory / name).is_file():
            return directory / name
    raise InvalidArgumentError(
        f"{directory} holds no cross-encoder: expected {' or '.join(MODEL_FILES)} and "
        "tokenizer.json (an ONNX export of a Hugging Face cross-encoder)"
    )


def relevance(logits: np.ndarray) -> np.ndarray:
    """One relevance per pair from a classifier head: the sigmoid of a single logit, or the
    probability of the last class when there are several (binary "relevant" heads)."""
    logits = np.asarray(logits, dtype=np.float64)
    if logits.ndim == 1:
        logits = logits[:, None]
    if logits.ndim != 2 or logits.shape[1] == 0:
        raise RerankError(f"the cross-encoder gave logits of shape {logits.shape}")
    if logits.shape[1] == 1:
        return np.asarray(1.0 / (1.0 + np.exp(-logits[:, 0])))
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return np.asarray(shifted[:, -1] / shifted.sum(axis=1))


class OnnxCrossEncoder(ScoringReranker):
    """Scores ``(query, passage)`` pairs with an ONNX sequence classifier, in batches."""

    name = "cross_encoder"

    def __init__(
        self,
        model_dir: str | Path,
        *,
        max_length: int = 512,
        batch_size: int = 16,
        top_n: int | None = None,
        threads: int | None = None,
    ) -> None:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise InvalidArgumentError(
                f"the cross-encoder needs onnxruntime and tokenizers: {exc}; "
                "pip install 'ragspine[embed-onnx]'"
            ) from exc
        directory = Path(model_dir)
        model_file = find_model_file(directory)
        tokenizer_file = directory / "tokenizer.json"
        if not tokenizer_file.is_file():
            raise InvalidArgumentError(f"{directory} has no tokenizer.json")
        self.model_dir = directory
        self.top_n = top_n
        self.batch_size = batch_size
        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.tokenizer.enable_truncation(max_length)
        self.tokenizer.enable_padding()
        options = ort.SessionOptions()
        if threads is not None:
            options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(
            str(model_file), options, providers=["CPUExecutionProvider"]
        )
        self.inputs = {i.name for i in self.session.get_inputs()}

    def score(self, query: str, results: Sequence[Snippet]) -> list[float]:
        scores: list[float] = []
        for start in range(0, len(results), self.batch_size):
            batch = results[start : start + self.batch_size]
            encodings = self.tokenizer.encode_batch([(query, s.text) for s in batch])
            feed: dict[str, Any] = {
                "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
            }
            logits = self.session.run(None, {k: v for k, v in feed.items() if k in self.inputs})
            scores.extend(relevance(logits[0]).tolist())
        return scores
