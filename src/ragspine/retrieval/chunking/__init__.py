"""Chunking and the versioned chunk store."""
