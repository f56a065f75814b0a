"""pallasite: a language server and agent system for JAX/Pallas TPU kernels.

The layers live in sibling folders installed under this namespace: ``analysis`` (kernel files read
as source, never JAX), ``runner`` (everything that imports JAX, and the worker), ``knowledge``
(catalog, docs, results store), ``agents`` (LLM loops) and ``server`` (LSP server and CLI).
"""

__version__ = "0.1.0"
