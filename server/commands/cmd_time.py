"""`pallasite time FILE|TASK_DIR` and `pallasite profile FILE|TASK_DIR`: honest numbers, anywhere.

The candidate is checked first (fresh random inputs, a second shape, NaN-filled outputs, inputs
unchanged, a pallas_call that really ran, not the reference in disguise) and then timed against
the reference compiled by XLA on the same device (``runner/measure/timing.py``). `profile` adds a trace,
per-kernel device time and the roofline. ``--backend`` picks where the worker runs: ``local``,
``ssh`` (``--host`` or ``--ssh-command``) or ``ray``; ``estimate`` runs nothing on a device: the cost
model prices the kernel and its reference for ``--target``, labelled as an estimate. Results go to the workspace's results store
with their provenance (``--no-store`` skips it). Exit status: 0 timed (or estimated), 1 rejected, 2 could not time.
"""

from __future__ import annotations

import argparse
import sys

from .console import progress_stream


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    from . import flags

    parser.add_argument("task", metavar="FILE|TASK_DIR",
                        help="a kernel file, a JAXBench task folder (optimized.py vs baseline.py) or a MaxKernel one")
    flags.add(parser, "--kernel", command)
    parser.add_argument("--task", metavar="TASK_DIR", dest="against", help=argparse.SUPPRESS)  # old: FILE --task DIR
    flags.add(parser, "--entry", command)
    parser.add_argument("--config", action="append", default=[], metavar="NAME=INT",
                        help="a tunable's value (repeatable), e.g. --config block_rows=128")
    flags.add(parser, "--runs", command)
    parser.add_argument("--warmup", type=int, default=2, help="untimed calls first (compilation)")
    flags.add(parser, "--seed", command)
    parser.add_argument("--no-extra-shape", action="store_true", help="skip the check at a second input shape")
    parser.add_argument("--max-speedup", type=float, default=20.0, help="flag speedups above this for a second look")
    if command == "profile":
        parser.add_argument("--trace-dir", help="where the worker writes the trace (default: a temporary folder)")
    flags.add(parser, "--target", command)
    flags.add(parser, "--format", command)
    flags.add(parser, "--time-limit", command)
    flags.add(parser, "--memory-mb", command)
    flags.add(parser, "--no-store", command)
    group = parser.add_argument_group("where the worker runs")
    flags.add(group, "--backend", command)
    flags.add(group, "--host", command)
    flags.add(group, "--ssh-command", command)
    flags.add(group, "--remote-worker", command)
    flags.add(group, "--ray-address", command)
    flags.add(group, "--ray-resources", command)
    group.add_argument("--platforms", help="JAX_PLATFORMS for the worker (default: its accelerator, else CPU)")


def _backend(args: argparse.Namespace):
    """Where the worker runs, from --backend and its flags (validated: ValueError says what is missing).
    ``estimate`` runs a local worker that only prices the kernel and its reference."""
    from ...engine.workers.remote import BackendSettings, parse_resources

    hosts = args.host or []
    if len(hosts) > 1:
        raise ValueError(f"pallasite {args.command} runs on one host; got --host {' --host '.join(hosts)} "
                         "(a pool of hosts is for optimize, tune, search and eval)")
    kind = "local" if args.backend == "estimate" else args.backend
    settings = BackendSettings(kind=kind, host=hosts[0] if hosts else None, command=args.ssh_command,
                               remote_worker=args.remote_worker, ray_address=args.ray_address,
                               ray_resources=parse_resources(args.ray_resources), platforms=args.platforms)
    settings.validate()
    return settings


def _files(args: argparse.Namespace):
    """The files to time: FILE or TASK_DIR, or a TASK_DIR with --kernel FILE (the old FILE --task TASK_DIR
    still works, with a note)."""
    from ...engine import timing

    if args.kernel is not None and args.against is not None:
        raise ValueError("give --kernel FILE with the task folder (not --task as well)")
    if args.against is not None:
        print(f"pallasite {args.command}: note: FILE --task TASK_DIR is deprecated and goes in the next release; "
              f"use TASK_DIR --kernel FILE", file=sys.stderr)
        return timing.task_files(args.task, args.against)
    if args.kernel is not None:
        return timing.task_files(args.kernel, args.task)
    return timing.task_files(args.task)


def _record(run_, path: str) -> None:
    """Store the measurements in the workspace's results store (outside a project: here); a note on failure."""
    from ...engine import timing
    from ...engine.store_cache import workspace_for

    note = timing.record(run_, path, str(workspace_for([path])))
    if note:
        run_.warnings.append(note)


def _target(args: argparse.Namespace, path: str) -> str:
    """The chip: --target (checked by the parser), else the project's `target` setting, as in every command."""
    from ..run_request import project_settings

    return args.target or project_settings(path).target


def _memory_mb(args: argparse.Namespace, path: str) -> int:
    """--memory-mb, else the project's check.memoryMb, as in every command."""
    from ..run_request import project_settings

    return args.memory_mb or project_settings(path).check.memoryMb


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


def _refuse(args: argparse.Namespace, files) -> None:
    """Usage a worker should never see (ValueError, exit 2): counts out of range, a file with no Pallas."""
    from ..run_request import refuse_non_kernel

    if args.runs is not None and args.runs < 1:
        raise ValueError(f"--runs {args.runs}: give the number of timed runs (1 or more)")
    if args.warmup < 0:
        raise ValueError(f"--warmup {args.warmup}: give the number of untimed calls (0 or more)")
    refuse_non_kernel(files.path, args.command, does=f"{args.command}s a Pallas kernel against its reference")


def run(args: argparse.Namespace) -> int:
    try:
        files = _files(args)
        _refuse(args, files)
        settings = _backend(args)
        target = _target(args, files.path)
        if args.backend == "estimate":
            return _estimate(args, files, settings, target)
        params = _request(args, files, target)
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return _measure(args, files, settings, params)


def _request(args: argparse.Namespace, files, target: str):
    from ...engine import timing

    return timing.time_request(files, args.command, entry=args.entry, config=_config(args.config), runs=args.runs,
                               warmup=args.warmup, seed=args.seed, max_speedup=args.max_speedup,
                               extra_shape=False if args.no_extra_shape else None,
                               trace_dir=getattr(args, "trace_dir", None),
                               chip=target if args.command == "profile" else None)


def _measure(args: argparse.Namespace, files, settings, params) -> int:
    """Time (or profile) on the backend's worker, record, print; exit 0 timed, 1 rejected, 2 not timed."""
    import asyncio

    from ...engine import timing
    from ..reports import timing_format

    show = progress_stream()  # progress on a terminal only (server/commands/console.py); JSON on stdout stays clean

    def progress(message: str, fraction: float | None) -> None:
        if show is not None:
            print(f"  ... {message}", file=show, flush=True)

    base = timing.timing_worker(_memory_mb(args, files.path), args.time_limit, platforms=args.platforms)
    floors = None
    if args.backend != "local" or args.platforms not in (None, "cpu"):  # a device's reply: held to our own figures
        progress("tracing your file here for the physical floors its device timings are held to", None)
        floors = asyncio.run(timing.trusted_floors(files, entry=args.entry, base=base, timeout_s=args.time_limit))
    run_ = timing.run_timing_sync(settings, params, base=base, timeout_s=args.time_limit, floors=floors,
                                  on_progress=progress)
    if run_.result is not None and not args.no_store:
        _record(run_, files.path)
    print(timing_format.to_json_text(run_, files.path) if args.format == "json" else timing_format.to_text(run_, files.path))
    if run_.reply.status == "memory":
        print(memory_hint(args.command, run_.reply.memory_mb or base.memory_mb), file=sys.stderr)
    return {"ok": 0, "rejected": 1}.get(timing_format.status_of(run_), 2)


def memory_hint(command: str, limit_mb: int) -> str:
    """What to do when the worker went over its memory limit: the flag and the setting that raise it, a
    value (twice the limit, within this machine's memory), and why a laptop needs more than a TPU host."""
    import psutil

    total_mb = psutil.virtual_memory().total // 2**20
    suggest = min(2 * limit_mb, max(limit_mb, total_mb * 3 // 4 // 1024 * 1024))
    raise_it = (f"rerun with --memory-mb {suggest} (or set check.memoryMb = {suggest} in [tool.pallasite]); this "
                f"machine has {total_mb} MiB" if suggest > limit_mb else
                f"this machine has {total_mb} MiB, so a higher --memory-mb cannot help here")
    return (f"hint: pallasite {command} needed more than the worker's {limit_mb} MiB: without a TPU the kernel runs "
            f"in interpret mode on the CPU, its arrays at full size; {raise_it}; or time it on a TPU (--backend ssh "
            "or ray, docs/tpu.md)")


def _estimate(args: argparse.Namespace, files, settings, target: str) -> int:
    """--backend estimate: the kernel and its reference priced by the cost model for the chip, nothing run
    on a device; exit 0 with both figures, 2 when either could not be estimated (why on stderr)."""
    import asyncio
    import json

    from ...engine.estimates import estimate_pair
    from ...engine.timing import timing_worker
    from ...engine.workers.remote import open_remote
    from ...engine.sources import sources_for
    from ..reports import timing_format

    base = timing_worker(_memory_mb(args, files.path), args.time_limit, platforms="cpu")

    async def ask():
        backend = open_remote(settings, base)
        try:
            return await estimate_pair(backend, sources_for(files.path), target, entry=args.entry,
                                       config=_config(args.config) or None, timeout_s=args.time_limit,
                                       reference=sources_for(files.reference_path) if files.reference_path else None)
        finally:
            await backend.close()

    paired, _, _ = asyncio.run(ask())
    if args.format == "json":
        print(json.dumps({"version": 1, "tool": f"pallasite {args.command}", "path": files.path, "backend": "estimate",
                          "target": target, "label": paired.label, "kernel_s": paired.kernel_s,
                          "reference_s": paired.reference_s, "speedup": paired.speedup, "why": paired.why,
                          "kernel_bound": paired.kernel_bound, "reference_bound": paired.reference_bound,
                          "caveat": paired.caveat}, indent=2))
    else:
        print(timing_format.estimate_text(files.path, paired))
    if paired.why:
        print(f"error: {files.path}: no estimated speedup: {paired.why}", file=sys.stderr)
    return 0 if paired.speedup is not None else 2
