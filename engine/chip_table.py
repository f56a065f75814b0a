"""The chip table for the client side (the CLI, hovers): from the cache, else measured by a worker.

A worker measures the table (runner/chip_probe.py, via its "chips" op); the result is cached under
the versions that worker reported (knowledge/chips.py) when every scoped-VMEM limit was measured.
Reading the cache without a worker uses this interpreter's versions (``installed_versions``),
which are the worker's too unless the settings name another interpreter. Never imports jax.

    specs = cached()                                   # None: not measured for these versions
    measured = await from_worker(client, probe=True)   # .specs, .versions, .error
    remember(measured.specs, measured.versions)         # cached when every limit was measured
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..analysis.types import ChipSpec, installed_versions
from ..knowledge import chips as chip_cache


def cached(versions: dict[str, str | None] | None = None) -> list[ChipSpec] | None:
    """The cached table for ``versions`` (default: this interpreter's), or None."""
    return chip_cache.read_cache(versions or installed_versions())


def remember(specs: list[ChipSpec], versions: dict[str, Any]) -> str | None:
    """Cache a table measured under ``versions`` if every limit was measured; the path, or None."""
    if not chip_cache.complete(specs) or not versions.get("jax"):
        return None
    return chip_cache.write_cache(specs, versions)


@dataclass(frozen=True)
class Measured:
    """A worker's answer to "chips": the table and the versions it is valid for, or why not."""

    specs: list[ChipSpec]
    versions: dict[str, Any]
    error: str | None = None


def _from_reply(reply: Any) -> Measured:
    if not reply.ok:
        return Measured([], {}, f"the worker could not build the chip table: {reply.message}")
    return Measured(list(reply.result.chips), dict(reply.result.versions))


async def from_worker(client: Any, *, probe: bool = True, timeout_s: float | None = None,
                      purpose: str = "check") -> Measured:
    """Ask a worker client, or a backend (for a worker of ``purpose``), to measure the table
    (``remember`` it to cache it)."""
    from ..wire.messages import ChipsParams

    return _from_reply(await client.request(ChipsParams(probe=probe), purpose=purpose, timeout_s=timeout_s))


def table_sync(config: Any = None, *, probe: bool = True) -> tuple[list[ChipSpec], str | None]:
    """For the CLI: the cached table when it has what is asked (every limit when ``probe``), else
    one built by a short-lived worker (and cached). (specs, None) or ([], why)."""
    from ..wire.messages import ChipsParams

    from .workers.client import WorkerConfig, run_requests_sync

    found = cached()
    if found is not None and (not probe or chip_cache.complete(found)):
        return found, None
    [reply] = run_requests_sync(config or WorkerConfig(), [ChipsParams(probe=probe)])
    measured = _from_reply(reply)
    if measured.error is None:
        remember(measured.specs, measured.versions)
    return measured.specs, measured.error
