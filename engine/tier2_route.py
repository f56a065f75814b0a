"""How a check with the results store asks the worker for tiers 1 and 2: tier 1 first (then tier 2
from the store by the lowered module's hash, or from the worker in a second request), or both in
one request.

The two-request route lets an unchanged lowered module skip the compiler, but when tier 2 must
compile anyway it costs a second request in which the worker imports the file and lowers the kernel
again: measured on tests/data/lsp/add_ok.py with a warm worker (load 4-5), tier 1 alone 64 ms,
then tier 2 148 ms (229 ms for the check), against about 180 ms for both in one request.

What the route is chosen by is what the client knows without lowering: the file's code where it
stands, read without its comments and trailing blank space (``code_digest``). The lowered module's
hash that tier 2 is stored under includes the source locations (line and column of each
operation: runner/tiers.compiler_tiers), so a line added or removed above the kernel's code, even a
comment line, moves them and tier 2 compiles again: such a text counts as new code. (Before, the
digest ignored all blank space and comment lines; a comment line inserted into add_ok.py's kernel
then went tier 1 first (43 ms) and missed the store, tier 2 in a second request (86 ms): 132 ms,
against 106 ms for both tiers in one request, in-process at load 4.) A path's code seen before in
this process (an undo, a comment changed in place or added at the end, the same file saved again)
goes the two-request way, its tier 2 most likely stored; so does a path seen for the first time (a
file opened again finds its verdicts from an earlier session in the store). A path whose code
changed since its last check (none of its last ``PER_PATH`` codes) asks for both tiers at once.
Either way the verdicts are the same (the store holds what the compiler said); only the time
differs. The digests kept are bounded: ``PER_PATH`` per path, ``MAX_PATHS`` paths.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict

PER_PATH = 16
MAX_PATHS = 256

_COMMENT = re.compile(r"[ \t\f]*#[^\n]*")
_TRAILING = re.compile(r"[ \t\f\r\v]+$", re.M)
_SEEN: OrderedDict[str, list[bytes]] = OrderedDict()
_LOCK = threading.Lock()


def code_digest(text: str) -> bytes:
    """A digest of ``text``'s code where it stands: its comments and the blank space ending each line
    and the file left out, its lines and columns kept (a ``#`` inside a string is taken for a
    comment too: a digest that changes less often only sends more checks the two-request way,
    whose answer is the same)."""
    code = _TRAILING.sub("", _COMMENT.sub("", text)).rstrip()
    return hashlib.blake2b(code.encode("utf-8", errors="surrogatepass"), digest_size=16).digest()


def tier1_first(path: str, text: str) -> bool:
    """Whether the check of ``text`` at ``path`` should ask tier 1 alone first (its tier 2 may be
    stored), and remember the text's code for the path's next check."""
    digest = code_digest(text)
    key = path
    with _LOCK:
        seen = _SEEN.get(key)
        first = seen is None or digest in seen
        if seen is None:
            seen = _SEEN[key] = []
        if digest in seen:
            seen.remove(digest)
        seen.append(digest)
        del seen[:-PER_PATH]
        _SEEN.move_to_end(key)
        while len(_SEEN) > MAX_PATHS:
            _SEEN.popitem(last=False)
    return first
