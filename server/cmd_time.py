"""`pallasite time FILE|TASK_DIR` and `pallasite profile FILE|TASK_DIR`: honest numbers, anywhere.

The candidate is checked first (fresh random inputs, a second shape, NaN-filled outputs, inputs
unchanged, a pallas_call that really ran, not the reference in disguise) and then timed against
the reference compiled by XLA on the same device (``runner/timing.py``). `profile` adds a trace,
per-kernel device time and the roofline. ``--backend`` picks where the worker runs: ``local``,
``ssh`` (``--host`` or ``--ssh-command``) or ``ray``. Results go to the workspace's results store
with their provenance (``--no-store`` skips it). Exit status: 0 timed, 1 rejected, 2 could not time.
"""

from __future__ import annotations

import argparse
import sys

from ..engine.client import WorkerConfig


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    from . import flags

    parser.add_argument("task", metavar="FILE|TASK_DIR",
                        help="a kernel file, a JAXBench task folder (optimized.py vs baseline.py) or a MaxKernel one")
    parser.add_argument("--task", metavar="TASK_DIR", dest="against",
                        help="score a stand-alone kernel FILE against this JAXBench task's reference and inputs")
    flags.add(parser, "--entry")
    parser.add_argument("--config", action="append", default=[], metavar="NAME=INT",
                        help="a tunable's value (repeatable), e.g. --config block_rows=128")
    parser.add_argument("--runs", type=int, default=20 if command == "time" else 5, help="timed runs (each)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed calls first (compilation)")
    flags.add(parser, "--seed", "of the fresh random inputs (default: a new one each run)")
    parser.add_argument("--no-extra-shape", action="store_true", help="skip the check at a second input shape")
    parser.add_argument("--max-speedup", type=float, default=20.0, help="flag speedups above this for a second look")
    if command == "profile":
        parser.add_argument("--trace-dir", help="where the worker writes the trace (default: a temporary folder)")
        flags.add(parser, "--target", "whose roofline to use without a TPU")
    flags.add(parser, "--format", default="text")
    flags.add(parser, "--time-limit", "of the whole request (default 600)", default=600.0)
    flags.add(parser, "--memory-mb", "RSS; a remote worker enforces it itself (default 16384)", default=16384)
    flags.add(parser, "--no-store", "the measurements are not recorded")
    group = parser.add_argument_group("where the worker runs")
    flags.add(group, "--backend", "default local: this machine's accelerator, else TPU interpret mode on its CPU",
              default="local", choices=("local", "ssh", "ray"))
    flags.add(group, "--host")
    flags.add(group, "--ssh-command", "e.g. 'gcloud compute tpus tpu-vm ssh NAME --zone Z --command \"{worker}\"'")
    flags.add(group, "--remote-worker", "e.g. '~/venv/bin/pallasite worker' (default: pallasite worker)",
              default="pallasite worker")
    flags.add(group, "--ray-address")
    flags.add(group, "--ray-resources")
    group.add_argument("--platforms", help="JAX_PLATFORMS for the worker (default: its accelerator, else CPU)")


def _backend(args: argparse.Namespace):
    """Where the worker runs, from --backend and its flags (validated: ValueError says what is missing)."""
    from ..engine.remote import BackendSettings, parse_resources

    settings = BackendSettings(kind=args.backend, host=args.host, command=args.ssh_command,
                               remote_worker=args.remote_worker, ray_address=args.ray_address,
                               ray_resources=parse_resources(args.ray_resources), platforms=args.platforms)
    settings.validate()
    return settings


def _record(run_, path: str) -> None:
    """Store the measurements in the workspace's results store (outside a project: here); a note on failure."""
    from ..engine import timing
    from ..engine.store_cache import workspace_for

    note = timing.record(run_, path, str(workspace_for([path])))
    if note:
        run_.warnings.append(note)


def _target(args: argparse.Namespace, path: str) -> str | None:
    """profile's chip: --target, else the project's `target` setting, as in every command (time has none)."""
    if args.command != "profile":
        return None
    from .run_setup import project_settings

    return args.target or project_settings(path).target


def _config(pairs: list[str]) -> dict[str, int]:
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"--config takes NAME=INT, got {pair!r}")
        try:
            out[name.strip()] = int(value)
        except ValueError:
            raise ValueError(f"--config {name}: {value!r} is not an integer") from None
    return out


def run(args: argparse.Namespace) -> int:
    from ..engine import timing
    from . import timing_format

    op = args.command
    try:
        files = timing.task_files(args.task, getattr(args, "against", None))
        settings = _backend(args)
        params = timing.time_request(files, op, entry=args.entry, config=_config(args.config), runs=args.runs,
                                     warmup=args.warmup, seed=args.seed, max_speedup=args.max_speedup,
                                     extra_shape=False if args.no_extra_shape else None,
                                     trace_dir=getattr(args, "trace_dir", None), target=_target(args, files.path))
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    show = args.format == "text" or sys.stderr.isatty()  # progress on stderr: JSON on stdout stays clean

    def progress(message: str, fraction: float | None) -> None:
        if show:
            print(f"  ... {message}", file=sys.stderr, flush=True)

    base = WorkerConfig(timeout_s=args.time_limit, platforms=args.platforms, memory_mb=args.memory_mb)
    run_ = timing.run_timing_sync(settings, params, base=base, timeout_s=args.time_limit, on_progress=progress)
    if run_.result is not None and not args.no_store:
        _record(run_, files.path)
    print(timing_format.to_json_text(run_, files.path) if args.format == "json" else timing_format.to_text(run_, files.path))
    return {"ok": 0, "rejected": 1}.get(timing_format.status_of(run_), 2)
