"""A pool of device workers: N members (Ray actors, ssh hosts, a local worker), one queue per chip kind.

``DevicePool(members)`` is what ``Engine.device`` hands every device phase of a run (eval's tests and
timings, a search round's evaluations, optimize's tests and timings, tune's configurations):

- **Members.** Each ``Member`` opens one client (``WorkerClient`` over ssh, ``RayBackend``, or a test
  double) lazily; the pool starts them all on the first request, concurrently, and reads each one's
  handshake: its device kind (``devices[0]``, e.g. ``TPU v6 lite``) and versions. A member that cannot
  start is *lost* with the reason; the others serve.
- **Per-chip queues.** A request names the device ``kind`` it must run on, or leaves it to the pool's
  *run kind*: the kind most live members have (``device_kind`` chooses in a mixed pool). A job for a
  kind goes only to members of that kind, so one run's timings are all of one chip; ``describe_kinds``
  says a mixed pool is mixed.
- **Faults.** A reply that says the member was lost (``crashed``: the worker, its actor or its
  connection died; ``not_started``: it could not be reached) re-queues the job on another member of
  the kind that has not tried it (at most ``max_requeues`` times, then the last reply is returned with
  the members it was tried on; with no other member the reply is returned as it came, as with one
  worker). A member whose handshake changed kind after a restart has its reply discarded and the job
  re-queued: a timing is never mixed across two device kinds. A crashed member's client restarts its
  worker (or Ray actor) on its next job; a member that cannot be reached ``max_losses`` times in a row
  is retired (*lost*). Timeouts, memory limits, errors and rejections are the job's, not the member's:
  answered as they are.
- **State.** ``states()`` lists each member (where, kind, idle/busy/lost, jobs done, why lost);
  ``on_event`` receives one line per change worth showing (started, lost, re-queued).

Every request is one job on one member, so a reply never combines two members' work. Client side:
no JAX.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .backend import Reply

LOST_STATUSES = ("crashed", "not_started")  # the member (worker, actor, host, connection) was lost
MAX_REQUEUES = 2
MAX_LOSSES = 2
START_TIMEOUT_S = 300.0  # a member that has not started by then is lost (a worker's start has its own limit too)
ANY_KIND = "*"  # a request that may run on any member (each reply carries its own device kind)

State = Literal["new", "starting", "idle", "busy", "lost"]


def kind_of(handshake: Any) -> str | None:
    """The device kind a worker reported (its first device's ``device_kind``; the platform without one)."""
    if handshake is None:
        return None
    devices = tuple(getattr(handshake, "devices", ()) or ())
    return str(devices[0]) if devices else (getattr(handshake, "platform", None) or None)


@dataclass(frozen=True)
class MemberState:
    """One member as progress shows it."""

    name: str
    where: str
    kind: str | None
    state: State
    jobs: int
    losses: int
    why: str = ""
    versions: tuple[tuple[str, str | None], ...] = ()

    def line(self) -> str:
        kind = self.kind or "kind not known yet"
        text = f"{self.name} {self.where} ({kind}): {self.state}, {self.jobs} job(s)"
        return text + (f"; {self.why}" if self.why else "")


class Member:
    """One device worker of the pool: ``open()`` builds its client (any object with ``request``,
    ``close`` and optionally ``start``/``handshake``/``where``)."""

    def __init__(self, name: str, where: str, open: Callable[[], Any]) -> None:
        self.name, self.where, self.label, self._open = name, where, where, open
        self.client: Any = None
        self.state: State = "new"
        self.kind: str | None = None
        self.jobs = 0
        self.losses = 0  # in a row
        self.why = ""
        self.opened = 0
        self.on_close: Callable[[], Any] | None = None  # e.g. remove the Ray placement group the pool made

    @property
    def handshake(self) -> Any:
        return getattr(self.client, "handshake", None)

    async def start(self, timeout_s: float | None = None) -> None:
        """Open and start the client; a member that cannot start (or not within ``timeout_s``: a Ray
        actor whose resources the cluster has given to others waits forever) is lost, with why."""
        self.state = "starting"
        try:
            if self.client is None:
                self.client = self._open()
                self.opened += 1
            start = getattr(self.client, "start", None)
            if start is not None:
                await asyncio.wait_for(start(), timeout_s)
        except asyncio.TimeoutError:
            self.state, self.why = "lost", (f"did not start within {timeout_s:g} s (a Ray cluster without free "
                                            "resources for every worker: fewer --devices, or other --ray-resources)")
            await self.close()
            return
        except Exception as exc:  # noqa: BLE001 - a member that cannot start is lost, with why
            self.state, self.why = "lost", f"could not start: {type(exc).__name__}: {exc}"[:300]
            return
        self._read_where()
        self.kind = kind_of(self.handshake)
        self.state = "idle"

    def _read_where(self) -> None:
        node = getattr(self.client, "node", None)
        if isinstance(node, dict) and node.get("hostname"):  # a Ray actor: the node it landed on
            self.where = f"{self.label} on {node['hostname']}"

    def snapshot(self) -> MemberState:
        hello = self.handshake
        versions = tuple((k, getattr(hello, k, None)) for k in ("jax", "jaxlib", "libtpu", "pallasite")) \
            if hello is not None else ()
        return MemberState(self.name, self.where, self.kind, self.state, self.jobs, self.losses, self.why, versions)

    async def close(self) -> None:
        if self.client is not None:
            try:
                await self.client.close()
            except Exception:  # noqa: BLE001 - closing a dead member
                pass
        if self.on_close is not None:
            self.on_close()


class DevicePool:
    """N device workers with per-kind queues and re-queue on loss (see the module docstring)."""

    def __init__(self, members: Sequence[Member], *, kind: str = "pool", where: str = "",
                 device_kind: str | None = None, max_requeues: int = MAX_REQUEUES, max_losses: int = MAX_LOSSES,
                 on_event: Callable[[str], Any] | None = None, start_timeout_s: float = START_TIMEOUT_S) -> None:
        if not members:
            raise ValueError("a device pool needs at least one member")
        self.members = list(members)
        self.kind = kind  # the backend kind: local, ssh, ray
        self.where = where or ", ".join(m.where for m in self.members)
        self.device_kind = device_kind
        self.max_requeues, self.max_losses = max_requeues, max_losses
        self.on_event = on_event
        self.start_timeout_s = start_timeout_s
        self.requests = 0
        self.requeued = 0
        self.events: list[str] = []
        self._started = False
        self._start_lock = asyncio.Lock()
        self._changed: asyncio.Condition | None = None
        self.closed = False

    # ------------------------------------------------------------------ what it is

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def opened(self) -> int:
        """How many member clients were opened (the size of the pool unless a member was rebuilt)."""
        return sum(m.opened for m in self.members)

    @property
    def handshake(self) -> Any:
        return next((m.handshake for m in self.members if m.handshake is not None), None)

    def states(self) -> list[MemberState]:
        return [m.snapshot() for m in self.members]

    def kinds(self) -> dict[str, int]:
        """Live members by device kind."""
        return dict(collections.Counter(m.kind for m in self.members if m.state != "lost" and m.kind))

    @property
    def run_kind(self) -> str | None:
        """The kind jobs go to when a request names none: ``device_kind``, else the most common live kind
        (ties: the first in name order)."""
        if self.device_kind:
            return self.device_kind
        counts = collections.Counter(m.kind for m in self.members if m.state != "lost")
        if not counts:
            return None
        return sorted(counts.items(), key=lambda item: (-item[1], str(item[0])))[0][0]

    def describe_kinds(self) -> str:
        """One line: the pool's members by kind, and which kind the run's jobs go to when mixed."""
        kinds = self.kinds()
        lost = sum(m.state == "lost" for m in self.members)
        text = ", ".join(f"{n}x {k}" for k, n in sorted(kinds.items())) or "no live member"
        if len(kinds) > 1:
            text = f"a mixed pool: {text}; the run's jobs go to {self.run_kind} (choose with --device-kind)"
        return text + (f"; {lost} lost" if lost else "")

    # ------------------------------------------------------------------ life

    async def start(self) -> list[MemberState]:
        """Start every member (concurrently) and read their kinds; idempotent."""
        async with self._start_lock:
            if not self._started:
                self._started = True
                await asyncio.gather(*(m.start(self.start_timeout_s) for m in self.members if m.state == "new"))
                for m in self.members:
                    self._event(f"device pool: {m.snapshot().line()}")
                if len(self.kinds()) > 1 or any(m.state == "lost" for m in self.members):
                    self._event(f"device pool: {self.describe_kinds()}")
        return self.states()

    def _cond(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    def _event(self, line: str) -> None:
        self.events.append(line)
        if self.on_event is not None:
            try:
                self.on_event(line)
            except Exception:  # noqa: BLE001 - a broken progress sink never breaks a job
                pass

    async def _acquire(self, kind: str | None, avoid: set[str]) -> Member | None:
        """An idle live member of ``kind`` (ANY_KIND: any) not in ``avoid`` (the members that already lost
        this job); waits for one while such a member lives; None when none does."""
        cond = self._cond()
        async with cond:
            while True:
                live = [m for m in self.members if m.state != "lost" and m.name not in avoid
                        and (kind == ANY_KIND or m.kind == kind)]
                if not live or self.closed:
                    return None
                pick = [m for m in live if m.state == "idle"]
                if pick:
                    member = min(pick, key=lambda m: m.jobs)  # the least used: spreads jobs over members
                    member.state = "busy"
                    return member
                await cond.wait()

    async def _release(self, member: Member) -> None:
        cond = self._cond()
        async with cond:
            if member.state == "busy":
                member.state = "idle"
            cond.notify_all()

    async def request(self, params: Any, *, purpose: str = "device", timeout_s: float | None = None,
                      on_progress: Any = None, kind: str | None = None) -> Reply:
        """Run one job on a member of ``kind`` (None: the run kind; ANY_KIND: any member). Never raises
        for a member's sake: a lost member's job is re-queued, at most ``max_requeues`` times."""
        if self.closed:
            return Reply("cancelled", message="the device pool was closed")
        await self.start()
        self.requests += 1
        wanted = kind or self.run_kind
        tried: list[str] = []
        started = time.monotonic()
        last: Reply | None = None
        while True:
            member = await self._acquire(wanted, set(tried))
            if member is None:
                return self._none_left(wanted, tried, last, started)
            tried.append(member.name)
            try:
                reply = await member.client.request(params, purpose=purpose, timeout_s=timeout_s,
                                                    on_progress=on_progress)
                lost = await self._after(member, reply, wanted)
            finally:
                await self._release(member)
            if lost is None:
                return reply
            last = Reply("crashed", message=lost, elapsed_s=reply.elapsed_s) if reply.ok else reply
            if len(tried) > self.max_requeues or not self._others(member, wanted, tried):
                names = ", ".join(tried)
                if len(tried) == 1:
                    return last  # no other member of the kind to re-queue on: the reply as it came
                return dataclasses.replace(last, message=f"{last.message} (the job was tried on {len(tried)} "
                                           f"device workers: {names}; given up after {len(tried) - 1} re-queue(s))")
            self.requeued += 1
            self._event(f"device pool: {member.name} ({member.where}) lost its job ({lost[:160]}); re-queued "
                        f"(attempt {len(tried) + 1} of {self.max_requeues + 1})")

    def _others(self, member: Member, wanted: str | None, tried: list[str]) -> bool:
        """Whether a live member of the kind not yet tried for this job is left to re-queue it on."""
        return any(m.state != "lost" and m.name not in tried and (wanted == ANY_KIND or m.kind == wanted)
                   for m in self.members)

    async def _after(self, member: Member, reply: Reply, wanted: str | None) -> str | None:
        """Account for one reply; returns why the member lost the job (re-queue it), or None (keep it)."""
        member._read_where()
        now = kind_of(member.handshake)
        if reply.status in LOST_STATUSES:
            member.losses += 1
            member.why = f"{reply.status}: {reply.message}"[:300]
            # a crashed worker (or Ray actor) is restarted by its client on the next job; a member that
            # cannot be reached (not_started) max_losses times in a row is retired
            if reply.status == "not_started" and member.losses >= self.max_losses:
                member.state = "lost"
                self._event(f"device pool: {member.name} ({member.where}) retired after {member.losses} losses "
                            f"in a row: {member.why}")
            return member.why
        if now is not None and member.kind is not None and now != member.kind:  # restarted on another chip
            member.why = f"its worker came back as {now}, not {member.kind}"
            member.kind = now
            if wanted not in (None, ANY_KIND) and now != wanted:
                return f"{member.why}: the reply is discarded (a timing is never mixed across two device kinds)"
        if member.kind is None and now is not None:
            member.kind = now
        member.losses = 0
        member.jobs += 1
        return None

    def _none_left(self, wanted: str | None, tried: list[str], last: Reply | None, started: float) -> Reply:
        if self.closed:
            return Reply("cancelled", message="the device pool was closed")
        why = "; ".join(f"{m.name}: {m.why}" for m in self.members if m.state == "lost") or "none started"
        message = (f"no live device worker of kind {wanted or '?'} in the pool ({self.describe_kinds()}); "
                   f"lost: {why}")
        if last is not None:
            return dataclasses.replace(last, message=f"{last.message}; then {message}")
        return Reply("not_started", message=message, elapsed_s=time.monotonic() - started, start_problem="exited")

    async def close(self) -> None:
        self.closed = True
        await asyncio.gather(*(m.close() for m in self.members), return_exceptions=True)
        cond = self._cond()
        async with cond:
            cond.notify_all()
