"""Post-processing after rerank, before prompt assembly (R60)."""

from ragspine.retrieval.postprocess.base import Postprocessor
from ragspine.retrieval.postprocess.compress import ExtractiveCompressor
from ragspine.retrieval.postprocess.factory import PostprocessorChain, make_postprocessor
from ragspine.retrieval.postprocess.reorder import MMR, LostInTheMiddle

__all__ = [
    "MMR",
    "ExtractiveCompressor",
    "LostInTheMiddle",
    "Postprocessor",
    "PostprocessorChain",
    "make_postprocessor",
]
