"""The `pallasite` command line: a table of subcommands, each in a module of its own.

Each command module exposes ``add_arguments(parser, command)`` and ``run(args) -> int`` and is imported
only when its command runs, so `pallasite check` never pays for the language server's imports
(and nothing here imports JAX). Exit codes: 0 no errors, 1 errors found, 2 usage/internal failure.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback

from .commands.table import COMMANDS  # name -> (module, one-line help)
from .commands.flags import Parser as _Parser  # a usage error: one line, and where the help is

# One rule for keys: every `pallasite` process re-executes itself without the secret variables in its
# environment (engine/workers/secrets.py keeps their values in its memory), so no process that calls a model,
# starts workers or runs kernel code shows them in /proc/<pid>/environ. The worker, the process where
# kernel code runs, is not even handed them (wire/env.py filters the rest of its environment).


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="pallasite",
        description="The TPU compiler's verdict on Pallas kernels, at the right line, without a TPU.",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    command_line = argv is None  # a real `pallasite ...` process, not a caller running main() in its own
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        args = _parser().parse_args(argv)  # prints help / usage errors (exit 2)
        if args.version:
            from .. import __version__

            print(f"pallasite {__version__}")
            return 0
        _parser().print_help()
        return 2
    name = argv[0]
    # Provider keys leave the environment before anything else runs: the process re-executes itself,
    # so only when it is its own program (never replace a caller's process, e.g. a test runner's).
    if command_line:
        from ..engine.workers import secrets

        secrets.keep_in_memory_only(argv, hand_over=name != "worker")
    module = importlib.import_module(COMMANDS[name][0])
    parser = _Parser(prog=f"pallasite {name}", description=COMMANDS[name][1])
    module.add_arguments(parser, name)
    from .commands.flags import translate  # old flag spellings still work for one release, with a note

    args = parser.parse_args(translate(name, argv[1:]))
    args.command = name
    try:
        return int(module.run(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `pallasite settings --schema | head`: the reader left early
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as err:  # noqa: BLE001 - an internal failure is exit 2, never "errors found" (1)
        from .settings import SettingsError  # (imported here: `pallasite worker` never reads settings)

        if isinstance(err, SettingsError):  # a bad [tool.pallasite]: a configuration error, never run with defaults
            print(f"error: {err}", file=sys.stderr)
            return 2
        traceback.print_exc()
        print(f"error: internal error in pallasite {name} (the traceback above); please report it with the traceback", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
