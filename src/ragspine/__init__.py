"""ragspine: retrieval for RAG with citable chunks, CJK-aware BM25 and a versioned store."""

from ragspine.errors import (
    FilterError,
    InvalidArgumentError,
    KnowledgeBaseError,
    LoaderError,
    RagspineError,
)
from ragspine.ingest import Document, IngestReport
from ragspine.knowledge_base import KnowledgeBase
from ragspine.retrieval.link.snippet import Snippet

__version__ = "0.1.0"

__all__ = [
    "Document",
    "FilterError",
    "IngestReport",
    "InvalidArgumentError",
    "KnowledgeBase",
    "KnowledgeBaseError",
    "LoaderError",
    "RagspineError",
    "Snippet",
    "__version__",
]
