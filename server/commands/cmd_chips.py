"""`pallasite chips`: the TPU chip table (jax's numbers and the measured scoped-VMEM limits).

Read from the cache when it holds the table for the installed jax/libtpu, else measured by a
worker (this process never imports jax); ``--no-probe`` skips the libtpu probe of the limits.
"""

from __future__ import annotations

import json
import sys

from ...analysis.types import to_json
from ...engine.chip_table import table_sync
from ...knowledge.chips import format_chip_table


def add_arguments(parser, command: str) -> None:
    parser.add_argument("--no-probe", action="store_true",
                        help="skip the libtpu probe of the scoped-VMEM limit (shown as '?')")
    from . import flags

    flags.add(parser, "--format", command)


def run(args) -> int:
    """Print the chip table; exit 2 (with why) when no worker could build it."""
    specs, error = table_sync(probe=not args.no_probe)
    if error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.format == "json":
        print(json.dumps(to_json(specs), indent=1))
    else:
        print(format_chip_table(specs))
    return 0
