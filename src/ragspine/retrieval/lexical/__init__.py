"""Lexical retrieval: tokenizer, BM25, its index, and rank fusion."""
