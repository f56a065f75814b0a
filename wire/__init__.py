"""The contract between the client and the worker, imported by both sides: the typed messages of
every op (``messages.py``), the framing and handshake (``protocol.py``) and the environment a worker
may see (``env.py``). It imports only ``analysis.types`` and the standard library, so it ships to a
TPU host with ``runner/`` and the engine reaches the worker without importing ``runner/``."""
