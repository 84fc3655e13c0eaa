"""Post-processing after rerank, before prompt assembly (R60)."""

from ragspine.retrieval.postprocess.base import Postprocessor

__all__ = ["Postprocessor"]
