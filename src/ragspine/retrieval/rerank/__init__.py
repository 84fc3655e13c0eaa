"""Rerankers: reorder a fused candidate list before it reaches a prompt (R50–R55)."""
