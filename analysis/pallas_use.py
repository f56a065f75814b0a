"""Whether a file uses Pallas at all: itself, through a kernel library, or through its local modules.

A folder of tasks holds plain-JAX files next to the kernels (JAXBench's ``baseline.py``, a
reference, a helper): there is nothing for a Pallas checker to check in them, and a check of the
folder skips them quietly (``FileReport.skipped``) instead of calling them "not fully checked".
A file counts as using Pallas when it imports Pallas or a Pallas kernel library (tokamax), or when
one of its local modules (``analysis/local_imports.py``, followed transitively) does. Read from
the source only; nothing is imported.
"""

from __future__ import annotations

from .local_imports import find_local_modules
from .source import PALLAS_PREFIXES, Source

KERNEL_LIBRARIES = ("tokamax",)
NO_PALLAS = "no Pallas: neither the file nor its local modules import jax.experimental.pallas"


def uses_pallas(path: str, text: str) -> bool:
    """Whether the file at ``path`` (with ``text``) uses Pallas, itself or through a local module."""
    if _imports_pallas(text, path):
        return True
    try:
        local = find_local_modules(path, text)
    except (OSError, SyntaxError, ValueError):
        return False
    return any(_imports_pallas(m.text, m.path) for m in local)


def _imports_pallas(text: str, path: str) -> bool:
    return Source(text).imports_any(PALLAS_PREFIXES + KERNEL_LIBRARIES)
