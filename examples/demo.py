"""Answer the sample queries from a knowledge base, with numbered citations.

Usage: ``python examples/demo.py KB_DIR`` (``scripts/demo.sh`` builds KB_DIR first).
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from ragspine import KnowledgeBase
from ragspine.retrieval.link.narrative_link import NarrativeIndexRetriever, format_context


def scores(values: dict[str, float | None]) -> str:
    """Every stage's score; '-' where a channel did not return the chunk."""
    return " ".join(f"{k}={'-' if v is None else f'{v:.3f}'}" for k, v in values.items())


def show(kb: KnowledgeBase, query: str, **options: object) -> None:
    print(f"\nQ: {query}" + (f"   {options}" if options else ""))
    for rank, snippet in enumerate(kb.search(query, top_k=3, **options), start=1):  # type: ignore[arg-type]
        label = "" if snippet.sensitivity == "PUBLIC" else f" [{snippet.sensitivity}]"
        excerpt = textwrap.shorten(" ".join(snippet.text.split()), width=220, placeholder=" ...")
        print(f"  [{rank}] {excerpt}")
        print(f"      cite: {snippet.source_locator}{label}  {scores(snippet.scores)}")


def main() -> None:
    kb_dir = sys.argv[1] if len(sys.argv) > 1 else "demo-kb"
    queries = json.loads((Path(__file__).parent / "queries.json").read_text(encoding="utf-8"))
    with KnowledgeBase(kb_dir, create=False) as kb:
        stats = kb.stats()
        print(f"knowledge base {kb_dir}: {stats['documents']} documents, {stats['chunks']} chunks")
        for item in queries:
            show(kb, item["query"])
        show(kb, "铁路", filters={"entity": "莱索托"})
        show(kb, "DNA methylation")  # the owner's view: RESTRICTED chunks are shown, flagged
        # what an LLM gets: the agent link drops RESTRICTED chunks before any snippet is built
        snippets = NarrativeIndexRetriever(kb).retrieve("DNA methylation", top_k=3)
        print("\nContext for an LLM prompt (agent link, RESTRICTED left out):")
        print(textwrap.indent(format_context(snippets), "  "))


if __name__ == "__main__":
    main()
