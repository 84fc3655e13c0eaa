"""Query transforms and the safety gate (R40–R45), assembled by :func:`make_query_pipeline`."""

from __future__ import annotations

from ragspine.retrieval.query.factory import make_query_pipeline
from ragspine.retrieval.query.gate import SafetyGate, load_deny_list
from ragspine.retrieval.query.glossary import Glossary, GlossaryQueryRewriter, load_glossary
from ragspine.retrieval.query.pipeline import CorrectiveGrade, QueryPipeline

__all__ = [
    "CorrectiveGrade",
    "Glossary",
    "GlossaryQueryRewriter",
    "QueryPipeline",
    "SafetyGate",
    "load_deny_list",
    "load_glossary",
    "make_query_pipeline",
]
