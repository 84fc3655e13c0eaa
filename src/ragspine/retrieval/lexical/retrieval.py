"""The scoring core's public names, as the source documents name them (R20–R25, R40)."""

from ragspine.retrieval.hybrid import HybridRetriever
from ragspine.retrieval.lexical.bm25 import DEFAULT_BM25_B, DEFAULT_BM25_K1, bm25_scores
from ragspine.retrieval.lexical.fusion import DEFAULT_RRF_K, rrf_fuse
from ragspine.retrieval.lexical.index import BM25Index, LexicalHit
from ragspine.retrieval.lexical.tokenizer import Tokenizer, tokenize
from ragspine.retrieval.query.glossary import GlossaryQueryRewriter
from ragspine.retrieval.vector.embedding_backends import EmbeddingBackend

__all__ = [
    "DEFAULT_BM25_B",
    "DEFAULT_BM25_K1",
    "DEFAULT_RRF_K",
    "BM25Index",
    "EmbeddingBackend",
    "GlossaryQueryRewriter",
    "HybridRetriever",
    "LexicalHit",
    "Tokenizer",
    "bm25_scores",
    "rrf_fuse",
    "tokenize",
]
