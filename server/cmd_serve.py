"""`pallasite serve`: the language server over stdio (default) or TCP on 127.0.0.1 only."""

from __future__ import annotations

import argparse
import logging
import sys


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (the default)")
    parser.add_argument("--tcp", action="store_true", help="listen on 127.0.0.1 instead of stdio")
    parser.add_argument("--port", type=int, default=2087, help="TCP port with --tcp (default 2087)")
    parser.add_argument("--log-file", help="write the server's log to this file (default: none)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages (with --log-file)")


def run(args: argparse.Namespace) -> int:
    if args.port is not None and not 0 < args.port < 65536:
        print(f"pallasite serve: --port {args.port} is not a TCP port (1-65535).", file=sys.stderr)
        return 2
    if args.log_file:
        logging.basicConfig(filename=args.log_file, level=logging.DEBUG if args.verbose else logging.INFO)
    from pallasite.server.lsp import server

    if args.tcp:
        print(f"pallasite serve: listening on 127.0.0.1:{args.port}", file=sys.stderr)
        server.start_tcp("127.0.0.1", args.port)
    else:
        server.start_io()
    return 0
