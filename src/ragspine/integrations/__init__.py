"""Adapters that hand a knowledge base to agent frameworks (R73): LangChain and LlamaIndex.

Each lives in its own module so importing ragspine never imports a framework; install the
matching extra (``ragspine[langchain]``, ``ragspine[llamaindex]``) to use one.
"""
