"""Loading people's files: text, Markdown, HTML, PDF, DOCX (R14)."""

from ragspine.documents.loaders import LoadedDocument, load_file, supported_suffixes

__all__ = ["LoadedDocument", "load_file", "supported_suffixes"]
