"""The device pool (engine/workers/device_pool.py) over in-process fake devices (tests/fake_devices.py):
N workers at once, a lost worker's job re-queued (at most twice), per-kind queues in a mixed pool,
a worker that comes back as another chip, a host that cannot be reached retired, and the pool built
from backend settings (engine/workers/device.py)."""

from __future__ import annotations

import asyncio

import pytest

from fake_devices import Crashes, FakeDevice, Gauge, ok_after
from pallasite.engine.workers.backend import Reply
from pallasite.engine.workers.device import members
from pallasite.engine.workers.device_pool import ANY_KIND, DevicePool, Member
from pallasite.engine.workers.remote import BackendSettings, read_hosts_file, where

V5E, V6E = "TPU v5 lite", "TPU v6 lite"


def pool_of(kinds, answer, gauge=None, **kw):
    fakes = {}

    def opener(name, kind):
        def open_():
            fakes[name] = FakeDevice(name, kind, answer, gauge)
            return fakes[name]
        return open_

    pool = DevicePool([Member(f"w{i}", f"fake:{i}", opener(f"w{i}", k)) for i, k in enumerate(kinds)], **kw)
    return pool, fakes


def run(coro):
    return asyncio.run(coro)


def test_n_workers_run_n_jobs_at_once_and_every_job_gets_its_own_answer():
    gauge = Gauge()
    pool, fakes = pool_of([V6E] * 4, ok_after(0.05), gauge)

    async def go():
        try:
            return await asyncio.gather(*(pool.request(i) for i in range(12)))
        finally:
            await pool.close()

    replies = run(go())
    assert [r.result.params for r in replies] == list(range(12))
    assert gauge.most == 4  # four members, four jobs at a time, never more
    assert sorted(len(f.ran) for f in fakes.values()) == [3, 3, 3, 3]  # least-used first: spread evenly
    assert all(s.state == "idle" and s.kind == V6E for s in pool.states())
    assert all(f.closed for f in fakes.values())


def test_a_worker_killed_mid_job_has_its_job_requeued_on_another_and_nothing_is_lost():
    crashes = Crashes(on={("w1", 3), ("w1", 4)}, delay_s=0.02)
    events = []
    pool, fakes = pool_of([V6E] * 3, crashes, on_event=events.append)

    async def go():
        try:
            return await asyncio.gather(*(pool.request(i) for i in range(9)))
        finally:
            await pool.close()

    replies = run(go())
    assert all(r.ok for r in replies), [r.message for r in replies]
    assert [r.result.params for r in replies] == list(range(9))  # every job answered, in place
    # the crashed jobs were answered by another member than the one that lost them
    assert all(r.result.device != "w1" for r in replies if r.result.params in (3, 4) and crashes.on == set())
    assert pool.requeued >= 1 and any("re-queued" in e for e in events)
    assert fakes["w1"].starts >= 2  # its worker came back for later jobs: a crash does not retire a member
    assert all(s.state != "lost" for s in pool.states())


def test_a_job_that_kills_every_worker_fails_after_two_requeues_with_the_reason():
    pool, fakes = pool_of([V6E] * 4, Crashes(on={("w0", "*"), ("w1", "*"), ("w2", "*"), ("w3", "*")}))

    async def go():
        try:
            return await pool.request("bad kernel")
        finally:
            await pool.close()

    reply = run(go())
    assert reply.status == "crashed"
    assert "tried on 3 device workers" in reply.message and "given up after 2 re-queue(s)" in reply.message
    assert sum(len(f.ran) for f in fakes.values()) == 3  # once plus two re-queues, never a fourth


def test_with_one_worker_a_crash_is_the_reply_as_it_came():
    pool, fakes = pool_of([V6E], Crashes(on={("w0", 1)}))

    async def go():
        try:
            return await pool.request(1), await pool.request(2)
        finally:
            await pool.close()

    first, second = run(go())
    assert first.status == "crashed" and "SIGKILL" in first.message and "tried on" not in first.message
    assert second.ok and len(fakes["w0"].ran) == 2


def test_a_mixed_pool_says_so_and_jobs_for_a_chip_go_only_to_that_chip():
    pool, fakes = pool_of([V5E, V6E, V6E, V5E, V6E], ok_after(0.01))

    async def go():
        try:
            await pool.start()
            default = await asyncio.gather(*(pool.request(i) for i in range(10)))
            v5e = await asyncio.gather(*(pool.request(i, kind=V5E) for i in range(6)))
            anywhere = await asyncio.gather(*(pool.request(i, kind=ANY_KIND) for i in range(10)))
            return default, v5e, anywhere
        finally:
            await pool.close()

    default, v5e, anywhere = run(go())
    assert pool.run_kind == V6E  # three of five
    assert {r.result.kind for r in default} == {V6E} and {r.result.kind for r in v5e} == {V5E}
    assert {r.result.kind for r in anywhere} == {V5E, V6E}
    assert "a mixed pool: 2x TPU v5 lite, 3x TPU v6 lite" in pool.describe_kinds()
    assert any("mixed pool" in e for e in pool.events)


def test_device_kind_chooses_the_kind_of_a_mixed_pool_and_a_missing_kind_is_a_clear_reply():
    pool, _ = pool_of([V5E, V6E, V6E], ok_after(), device_kind=V5E)

    async def go():
        try:
            return await pool.request(1), await pool.request(2, kind="TPU v4")
        finally:
            await pool.close()

    chosen, missing = run(go())
    assert chosen.result.kind == V5E
    assert missing.status == "not_started" and "no live device worker of kind TPU v4" in missing.message


def test_a_worker_that_comes_back_as_another_chip_never_mixes_its_timing_in():
    class Switch:
        def __init__(self):
            self.switched = False

        async def __call__(self, device, params):
            if device.name == "w0" and not self.switched:  # restarted on another chip before answering
                self.switched = True
                device.kind = V5E
                device.handshake = None
                await device.start()
            return Reply("ok", result=(params, device.kind))

    pool, _ = pool_of([V6E, V6E], Switch())

    async def go():
        try:
            await pool.start()
            return await pool.request("t"), pool.states()
        finally:
            await pool.close()

    reply, states = run(go())
    assert reply.result == ("t", V6E)  # answered by the member still on the run's chip
    assert states[0].kind == V5E and "came back as TPU v5 lite" in states[0].why
    assert pool.requeued == 1


def test_a_host_that_cannot_be_reached_is_retired_and_the_others_serve():
    dead = {"w1"}

    def opener(name):
        return lambda: FakeDevice(name, V6E, ok_after(), fail_start="ssh: connect to host b port 22: "
                                  "Connection refused" if name in dead else None)

    pool = DevicePool([Member(f"w{i}", f"ssh:{h}", opener(f"w{i}")) for i, h in enumerate("abc")])

    async def go():
        try:
            return await asyncio.gather(*(pool.request(i) for i in range(6)))
        finally:
            await pool.close()

    replies = run(go())
    assert all(r.ok for r in replies) and {r.result.device for r in replies} == {"w0", "w2"}
    lost = [s for s in pool.states() if s.state == "lost"]
    assert [s.name for s in lost] == ["w1"] and "Connection refused" in lost[0].why
    assert "1 lost" in pool.describe_kinds()


def test_a_host_that_drops_later_is_retired_after_two_failed_reconnects():
    class Drops:
        async def __call__(self, device, params):
            if device.name == "w0" and params >= 2:
                return Reply("not_started", message="ssh: connect to host a: No route to host",
                             start_problem="exited")
            await asyncio.sleep(0.01)
            return Reply("ok", result=(params, device.name))

    pool, _ = pool_of([V6E, V6E], Drops())

    async def go():
        try:
            first = await asyncio.gather(pool.request(0), pool.request(1))
            rest = [await pool.request(i) for i in range(2, 8)]
            return first, rest
        finally:
            await pool.close()

    first, rest = run(go())
    assert all(r.ok for r in first + rest)
    assert [r.result[0] for r in rest] == list(range(2, 8)) and {r.result[1] for r in rest} == {"w1"}
    assert pool.states()[0].state == "lost" and pool.states()[1].state == "idle"


def test_members_from_settings_one_per_host_and_n_ray_actors(monkeypatch):
    from pallasite.engine.workers import remote

    monkeypatch.setattr(remote, "ray_installed", lambda: True)  # settings only: no Ray runs (README's command has no ray extra)
    hosts = BackendSettings(kind="ssh", host="a", hosts=("b", "c"))
    assert [m.where for m in members(hosts, opener=lambda s, b: s)] == ["ssh:a", "ssh:b", "ssh:c"]
    assert where(hosts) == "ssh:a+b+c"
    gcloud = BackendSettings(kind="ssh", hosts=("tpu-1", "tpu-2"),
                             command='gcloud compute tpus tpu-vm ssh {host} --zone z --command "{worker}"')
    opened = [m._open() for m in members(gcloud, opener=lambda s, b: s)]
    assert [s.command.split()[5] for s in opened] == ["tpu-1", "tpu-2"]
    ray = BackendSettings(kind="ray", ray_resources={"TPU": 1}, devices=8)
    assert len(members(ray)) == 8 and where(ray) == "ray:local"  # the size is not part of the run's name
    with pytest.raises(ValueError, match="needs --backend ray"):
        BackendSettings(kind="local", devices=2).validate()
    with pytest.raises(ValueError, match="ray-placement"):
        BackendSettings(kind="ray", ray_placement="everywhere").validate()


def test_hosts_file(tmp_path):
    path = tmp_path / "hosts"
    path.write_text("# my TPU VMs\ntpu-vm-1\n\nuser@tpu-vm-2  # the second\n")
    assert read_hosts_file(str(path)) == ("tpu-vm-1", "user@tpu-vm-2")


def test_a_worker_that_never_starts_is_lost_after_the_start_limit_and_the_others_serve():
    class Pending(FakeDevice):
        async def start(self):  # a Ray actor waiting for resources the cluster gave to others
            await asyncio.sleep(3600)

    members_ = [Member("w0", "ray #0", lambda: FakeDevice("w0", V6E, ok_after())),
                Member("w1", "ray #1", lambda: Pending("w1", V6E, ok_after()))]
    pool = DevicePool(members_, start_timeout_s=0.2)

    async def go():
        try:
            return await asyncio.wait_for(pool.request(1), 10)
        finally:
            await pool.close()

    reply = run(go())
    assert reply.ok and reply.result.device == "w0"
    lost = pool.states()[1]
    assert lost.state == "lost" and "did not start within 0.2 s" in lost.why
