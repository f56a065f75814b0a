"""The client side of execution (never imports JAX): the worker client and backends, the checker
that turns worker records into findings at spans of the user's file, and (soon) jobs. Used by the
CLI, the language server and the agents; what runs inside ``pallasite worker`` lives in ``runner/``.
"""
