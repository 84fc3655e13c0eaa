"""What the pipeline hands to an LLM or agent: snippets with full lineage."""
