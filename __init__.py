"""pallasite: a language server and agent system for JAX/Pallas TPU kernels.

The layers live in sibling folders installed under this namespace: ``analysis`` (kernel files read
as source, the seam types; never JAX), ``runner`` (the worker side: everything that runs inside
``pallasite worker`` and may import JAX), ``engine`` (the client side of execution: worker client,
checker, locating), ``knowledge`` (catalog, docs, results store, chip cache), ``agents`` (LLM
loops) and ``server`` (LSP server and CLI). The import rules: README, Architecture.
"""

__version__ = "0.1.0"
