"""The dense channel: embedding backends and vector stores."""
