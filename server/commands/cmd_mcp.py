"""`pallasite mcp [FOLDER]`: the Model Context Protocol server for coding agents (stdio; no network listener).

An agent host starts it in the user's project folder (its configuration names the command ``pallasite``,
the arguments ``["mcp"]`` and the folder); it serves the tools of server/mcp/mcp_server.py over stdin/stdout until
the host closes its input. ``pallasite mcp --trust [FOLDER]``, run by the user in a terminal, trusts the
folder (the user trust store the editor's trust question fills, server/trust.py) and exits: from then on the
server runs the folder's kernels in workers (tiers 1-3, estimate, judge, tune); before, tier 0 only.
Exit status: 0 the client left (or the folder was trusted), 2 a usage error or the `mcp` package missing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

INSTALL = ("pallasite mcp needs the official MCP SDK: pip install 'mcp>=2.3,<3' (pallasite's mcp extra; in the "
           "checkout: .venv/bin/pip install -e '.[mcp]')")


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument("folder", nargs="?", default=".", metavar="FOLDER",
                        help="the folder served: tool paths are inside it (default: the current folder)")
    parser.add_argument("--trust", action="store_true",
                        help="trust FOLDER to run its kernels in pallasite workers (remembered in your user trust "
                             "store, as the editor's trust question does), then exit; run it yourself, in a terminal")


def run(args: argparse.Namespace) -> int:
    folder = Path(args.folder).expanduser().resolve()
    if not folder.is_dir():
        print(f"error: {args.folder}: no such folder; give the project folder the agent works in", file=sys.stderr)
        return 2
    if args.trust:
        from ..trust import remember_trusted, trust_store_path

        remember_trusted(str(folder))
        print(f"trusted {folder}: pallasite mcp runs its kernels in workers from now on (remembered in "
              f"{trust_store_path()})")
        return 0
    try:
        import mcp.server.lowlevel  # noqa: F401 - the SDK, an optional extra
    except ImportError:
        print(f"error: {INSTALL}", file=sys.stderr)
        return 2
    from .. import lifetime
    from ..mcp.mcp_server import serve

    lifetime.end_with_signals()  # SIGTERM/SIGHUP/SIGINT: the workers end with the server
    code = serve(folder)
    lifetime.end_now(code)  # the client left: no worker outlives the server
    return code
