"""The knowledge base both adapter suites search."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ragspine import KnowledgeBase
from tests.integrations.corpus import CORPUS


@pytest.fixture(scope="module")
def knowledge_base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KnowledgeBase]:
    """One lexical knowledge base per module: building it is the slow part."""
    kb = KnowledgeBase(tmp_path_factory.mktemp("adapters") / "kb", embedding="none")
    kb.add_documents(CORPUS)
    yield kb
    kb.close()
