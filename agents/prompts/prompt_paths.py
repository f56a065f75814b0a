"""No machine paths in prompts: what the checker, the worker and the phases say is rewritten to names.

``local(text)`` replaces every absolute path (``/home/me/proj/kernel.py``, ``~/x/y.py``,
``C:\\\\proj\\\\k.py``; two components or more) by its last component, the file's name: compiler output,
tracebacks (jax's own files included), phase evidence, profiles and rejection reasons pass through it
before any prompt is built. A kernel's own source is sent as the user wrote it, never rewritten.
"""

from __future__ import annotations

import re

_ABSOLUTE = re.compile(r"(?<![\w.~/\\])(?:~|[A-Za-z]:)?(?:[/\\][\w.+@-]+)+[/\\](?P<name>[\w.+@-]+)")


def local(text: str) -> str:
    """``text`` with every absolute path shortened to its last component."""
    return _ABSOLUTE.sub(lambda m: m.group("name"), text) if text else text
