"""The retrieval pipeline: chunk → store → index → retrieve."""
