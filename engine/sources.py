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

from ..analysis.local_imports import MAX_BYTES, MAX_MODULES, find_local_modules, package_of  # noqa: F401
from ..wire.messages import SourceFile, Sources


# Task files the worker reads from beside the kernel (runner/tasks/maxkernel.py, tasks_runtime.py, timing.py):
# sent along (``module`` None: data, not imported), so a worker that sees only what the request carries
# (a confined one, or one on another host) finds them too.
COMPANIONS = ("kernel_task.yaml", "reference.py", "baseline.py")
COMPANION_MAX_BYTES = 1 << 20


def sources_for(path: str, text: str | None = None) -> Sources:
    """The request's ``Sources`` for ``path`` (its ``text`` when given, else read from disk)."""
    path = os.path.abspath(path)
    if text is None:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    package, root = package_of(path)
    modules = tuple(SourceFile(path=m.path, text=m.text, module=m.name) for m in find_local_modules(path, text))
    sent = {path, *(m.path for m in modules)}
    return Sources(file=SourceFile(path=path, text=text), modules=modules + _companions(path, sent), root=root,
                   package=package)


def _companions(path: str, sent: set[str]) -> tuple[SourceFile, ...]:
    out = []
    for name in COMPANIONS:
        file = os.path.join(os.path.dirname(path), name)
        try:
            if file in sent or not os.path.isfile(file) or os.path.getsize(file) > COMPANION_MAX_BYTES:
                continue
            with open(file, encoding="utf-8", errors="replace") as f:
                out.append(SourceFile(path=file, text=f.read()))
        except OSError:
            continue
    return tuple(out)


def trusted_sources(path: str, text: str) -> Sources:
    """The user's own file (``text`` of ``path``) sent beside a model's candidate for the judge
    (runner/judging/judge.py), under a name of its own so it never takes the candidate's place."""
    stem, ext = os.path.splitext(os.path.abspath(path))
    return sources_for(f"{stem}.pallasite-trusted{ext}", text)
