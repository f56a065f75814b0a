"""What a request carries of the user's code: the file's text and the local modules it imports.

``sources_for(path, text)`` sends the modules analysis/local_imports.py finds (the same finder
keys cached verdicts, so the cache and the worker agree on what the code is). The worker imports
them from the sent text under their original paths, so a worker on another host needs nothing of
the user's folder, and tracebacks still name the user's files. Installed packages are not sent
(the worker's environment provides them).

Client side: stdlib only, never imports the user's code.
"""

from __future__ import annotations

import os

from pallasite.analysis.local_imports import MAX_BYTES, MAX_MODULES, find_local_modules, package_of  # noqa: F401
from pallasite.runner.messages import SourceFile, Sources


def sources_for(path: str, text: str | None = None) -> Sources:
    """The request's ``Sources`` for ``path`` (its ``text`` when given, else read from disk)."""
    path = os.path.abspath(path)
    if text is None:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    package, root = package_of(path)
    modules = tuple(SourceFile(path=m.path, text=m.text, module=m.name) for m in find_local_modules(path, text))
    return Sources(file=SourceFile(path=path, text=text), modules=modules, root=root, package=package)
