"""The TPU compiler's own VMEM allocation for a tier-2 compile (worker side, stdlib only).

Asked to (``--xla_jf_dump_to=DIR --xla_jf_dump_category_filter=memory-report`` in
``LIBTPU_INIT_ARGS``, read once, when libtpu starts), libtpu writes one ``*vmem_report.html`` per
compiled module: a page whose ``const DATA = {...}`` object holds, per Mosaic kernel (HLO custom
call), the VMEM blocks the compiler allocated ("SCOPED": each input and output window with its
buffering levels, the scratch) and their total. Seen with libtpu 0.0.42.1: one 20 KB file per
compile, no measurable cost. That is the figure hovers call "the compiler's own allocation".

``enable`` sets the flags at worker start-up (before anything loads libtpu), only for a libtpu seen
to know them (an unknown flag value aborts libtpu at start), only when the user's own
``LIBTPU_INIT_ARGS`` dumps nothing, and never for a confined worker. ``take`` reads and removes what
the last compile wrote: the scoped VMEM bytes of each Mosaic kernel, in the module's order.
"""

from __future__ import annotations

import glob
import json
import os
import re
import tempfile

FLAGS = "--xla_jf_dump_to={dir} --xla_jf_dump_category_filter=memory-report"
SEEN_FROM = (0, 0, 42)  # the first libtpu this was seen with (0.0.42.1); older ones are left alone
_DATA = "const DATA ="
_state: dict[str, str] = {}


def _libtpu_version() -> tuple[int, ...] | None:
    try:
        from importlib.metadata import version

        return tuple(int(p) for p in re.findall(r"\d+", version("libtpu"))[:4])
    except Exception:  # noqa: BLE001 - no libtpu: tier 2 is unavailable anyway
        return None


def enable(environ: dict[str, str] | None = None) -> str | None:
    """Ask libtpu for its VMEM report (the folder it goes to), or None where it is not asked for:
    no libtpu, one older than ``SEEN_FROM``, the user's ``LIBTPU_INIT_ARGS`` already dump somewhere,
    or ``PALLASITE_VMEM_REPORT=0``."""
    env = os.environ if environ is None else environ
    found = _libtpu_version()
    args = env.get("LIBTPU_INIT_ARGS", "")
    if found is None or found < SEEN_FROM or "xla_jf_dump" in args or env.get("PALLASITE_VMEM_REPORT") == "0":
        return None
    folder = tempfile.mkdtemp(prefix="pallasite-vmem-")
    env["LIBTPU_INIT_ARGS"] = (args + " " + FLAGS.format(dir=folder)).strip()
    _state["dir"] = folder
    return folder


def take() -> list[int] | None:
    """The scoped VMEM bytes of each Mosaic kernel of the modules compiled since the last ``take``
    (their reports are removed); None when no report was asked for or written."""
    folder = _state.get("dir")
    if not folder:
        return None
    sizes: list[int] = []
    for path in sorted(glob.glob(os.path.join(folder, "*vmem_report.html")), key=os.path.getmtime):
        try:
            with open(path, encoding="utf-8") as f:
                sizes += kernel_sizes(f.read())
        except OSError:
            continue
        finally:
            try:
                os.remove(path)
            except OSError:
                pass
    return sizes or None


def kernel_sizes(page: str) -> list[int]:
    """Scoped VMEM bytes per Mosaic kernel from one report page ([] when it cannot be read): the
    ``total_size`` of each HLO breakdown but the ``<top-inlining-caller>`` summary."""
    at = page.find(_DATA)
    if at < 0:
        return []
    try:
        data, _ = json.JSONDecoder().raw_decode(page[at + len(_DATA):].lstrip())
    except ValueError:
        return []
    breakdowns = data.get("hlo_breakdowns") if isinstance(data, dict) else None
    if not isinstance(breakdowns, dict):
        return []
    out = []
    for name, part in breakdowns.items():
        if name.startswith("<") or not isinstance(part, dict):
            continue
        total = part.get("total_size")
        if isinstance(total, int):
            out.append(total)
    return out
