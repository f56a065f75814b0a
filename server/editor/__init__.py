"""The language server's editor features over the session: hover (``hover``, ``hover_facts``, ``hover_sources``,
``task_shapes``), code actions and lenses (``actions``, ``lenses``), inlay hints, and the commands that run work
from the editor (``job_command`` shared by ``fix_command``, ``optimize_lsp``, ``search_lsp``, ``timing_lsp``,
``tune_lsp``). Thin handlers: the logic lives in the engine and the agents.
"""
