"""The client side of execution (never imports JAX): one ``Engine`` (engine.py) that owns the
backends reaching workers (backend.py: the seam; pool.py: the local pool by purpose;
tests/fake_backend.py is the in-process one for tests), the results stores, the chip table and the jobs registry (jobs.py);
the checker that turns worker records into findings at spans of the user's file (checker.py,
locate.py, classify.py, agreement.py, reply_failures.py). Used by the CLI, the language server and
the agents; what runs inside ``pallasite worker`` lives in ``runner/``.
"""
