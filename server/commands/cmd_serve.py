"""`pallasite serve`: the language server over stdio (default) or TCP on 127.0.0.1 only."""

from __future__ import annotations

import argparse
import logging
import socket
import sys


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (the default)")
    parser.add_argument("--tcp", action="store_true", help="listen on 127.0.0.1 instead of stdio")
    parser.add_argument("--port", type=int, default=2087, help="TCP port with --tcp (default 2087)")
    parser.add_argument("--log-file", help="write the server's log to this file (default: none)")
    from . import flags

    flags.add(parser, "--verbose", command)


def run(args: argparse.Namespace) -> int:
    if args.port is not None and not 0 < args.port < 65536:
        print(f"error: --port {args.port} is not a TCP port (1-65535).", file=sys.stderr)
        return 2
    if args.log_file:
        try:
            open(args.log_file, "a").close()
        except OSError as exc:
            print(f"error: cannot write the log file {args.log_file}: {exc.strerror}; "
                  "choose a writable path or leave --log-file out.", file=sys.stderr)
            return 2
        logging.basicConfig(filename=args.log_file, level=logging.DEBUG if args.verbose else logging.INFO)
    if args.tcp:
        problem = _port_problem(args.port)
        if problem:
            print(f"error: cannot listen on 127.0.0.1:{args.port}: {problem}; "
                  "choose another --port.", file=sys.stderr)
            return 2
    from ..lsp import server

    from .. import lifetime

    lifetime.end_with_signals()
    if args.tcp:
        print(f"pallasite serve: listening on 127.0.0.1:{args.port}", file=sys.stderr)
        server.start_tcp("127.0.0.1", args.port)
    else:
        server.start_io(stdin=lifetime.EndOnEof(sys.stdin.buffer))
    lifetime.end_now(lifetime.exit_code)
    return 0


def _port_problem(port: int) -> str | None:
    """Why 127.0.0.1:``port`` cannot be listened on (None when it can), asked before the server starts."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None
