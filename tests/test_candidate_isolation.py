"""Nothing the candidate started reaches the judging (issue 56): the candidate's process runs in a PID namespace of
its own that ends with it (runner/isolation/nest.py), the judge and its verifier are undumpable before it exists and
out of its sight, and the verifier's answers carry a secret the candidate never sees.

Each attack is a candidate's module-level code run through the real ``time`` op (the judge's one path), in a
confined worker (the sandbox) and in a plain one (the user's own file), and its verdict is compared with the
verdict of the same kernel without the attack. Before: the verifier's socket was stolen with pidfd_getfd and a
daemon answered its checks (a plain XLA add judged "compiled, correct"); the candidate could signal the judge
(``kill(1, 0)`` in the sandbox) and list its processes; a setsid daemon outlived the candidate's process while
the judge ran the program.
"""

from __future__ import annotations

import os
import socket
import sys
import time
import uuid
from pathlib import Path

import pytest

from pallasite.engine.workers import spawn

DATA = Path(__file__).parent / "data"
UNTRUSTED = DATA / "untrusted"
USER = (DATA / "optimize" / "add.py").read_text()
RIGHT = (DATA / "optimize" / "candidates" / "big_blocks.py").read_text()
XLA = (UNTRUSTED / "xla_add_candidate.py").read_text()

PROBLEM = spawn.confinement_problem(sys.executable)
needs_namespaces = pytest.mark.skipif(PROBLEM is not None, reason=f"no confined worker here: {PROBLEM}")
MODES = [pytest.param(True, id="confined", marks=needs_namespaces), pytest.param(False, id="the user's own worker", marks=pytest.mark.pipeline)]


def preamble(name: str, **fill: object) -> str:
    text = (UNTRUSTED / name).read_text()
    for key, value in fill.items():
        text = text.replace("{" + key + "}", str(value))
    return text


def above(code: str, kernel: str) -> str:
    """``code`` as the candidate's module-level code, above the kernel's imports."""
    head, sep, rest = kernel.partition("\nimport jax\n")
    return head + "\n" + code + sep + rest if sep else code + "\n" + kernel


async def judged(confine: bool, tmp_path: Path, texts, user: str = USER) -> list:
    """Each text judged by the ``time`` op against the user's file ``user`` (``texts``: a list, or a function of
    the worker that makes it); the replies."""
    from pallasite.engine.workers.client import WorkerClient, WorkerConfig
    from pallasite.engine.timing import TaskFiles, time_request

    path = tmp_path / "kernel.py"
    path.write_text(user)
    out = []
    async with WorkerClient(WorkerConfig(confine=confine, timeout_s=240)) as worker:
        if callable(texts):
            texts = texts(worker)
        for text in texts:
            params = time_request(TaskFiles(str(path)), "time", runs=2, warmup=1, text=text, trusted=(str(path), user))
            reply = await worker.request(params)
            out.append(reply)
    return out


def verdict(reply) -> tuple:
    assert reply.ok, reply.message
    return reply.result.verdict, [r.trick for r in reply.result.rejections], reply.result.judged_by


@pytest.mark.parametrize("confine", MODES)
async def test_a_candidate_that_steals_the_verifiers_socket_gets_the_honest_verdict(tmp_path, confine):
    """The attack that landed: pidfd_getfd on the verifier's socket, the verifier killed, a daemon answering its
    checks with a kernel's facts. A plain XLA add was "compiled, correct"; now it gets XLA's own verdict."""
    thief, honest = await judged(confine, tmp_path, [above(preamble("verifier_thief_preamble.py"), XLA), XLA])
    assert verdict(honest)[:2] == ("rejected", ["no_pallas_call"]), honest.result
    assert verdict(thief) == verdict(honest), (thief.result.rejections, thief.result.error)
    assert "its own PID namespace" in thief.result.judge.isolation, thief.result.judge


@pytest.mark.parametrize("confine", MODES)
async def test_nothing_of_the_judge_is_within_the_candidates_reach(tmp_path, confine):
    """From the candidate's module code: a signal to every pid (kill(pid, 0), pid 1 first), the /proc listing,
    pidfd_open + pidfd_getfd, ptrace, /proc/<pid>/fd, mem and environ of every process not its own and of the
    test's and the worker's - all fail, and the verdict is the right kernel's."""
    def texts(worker):
        outsiders = f"{os.getpid()}, {worker.pid}, {worker.handshake.pid}"
        return [above(preamble("reach_preamble.py", outsiders=outsiders), RIGHT), RIGHT]

    probed, honest = await judged(confine, tmp_path, texts)
    assert verdict(honest) == ("ok", [], "the judge"), honest.result
    assert verdict(probed) == verdict(honest), probed.result.error
    assert probed.result.judge.isolation == "its own PID namespace, ended with it", probed.result.judge


def _named(token: str) -> list[int]:
    """Processes of this machine named ``token`` (their comm)."""
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/comm") as comm:
                if comm.read().strip() == token[:15]:
                    found.append(int(name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("confine", MODES)
async def test_a_daemon_the_candidate_leaves_is_gone_before_the_judge_runs_its_program(tmp_path, confine):
    """The candidate's module code double-forks a setsid daemon that waits for the candidate's process to end, then
    writes a marker, connects to this test's port and (in the sandbox) SIGKILLs every process it may signal, the
    verifier among them. It is gone with the candidate's process: no such process is left, the marker is never
    written, nothing connects, and the verdict is the right kernel's."""
    token = "pls" + uuid.uuid4().hex[:10]
    marker = tmp_path / "daemon-marker"
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    daemon = preamble("daemon_preamble.py", token=token, marker=marker, port=listener.getsockname()[1],
                      kill_all=confine)
    try:
        left, honest = await judged(confine, tmp_path, [above(daemon, RIGHT), RIGHT])
        time.sleep(0.5)
        connected = True
        try:
            listener.accept()[0].close()
        except OSError:
            connected = False
    finally:
        listener.close()
    assert verdict(honest) == ("ok", [], "the judge"), honest.result
    assert verdict(left) == verdict(honest), (left.result.error, left.result.rejections)
    assert not _named(token), f"the daemon still runs: {_named(token)}"
    assert not marker.exists() and not connected


def test_a_verifier_whose_answers_lack_the_requests_secret_is_not_believed(monkeypatch):
    """Every request to the verifier carries a fresh secret; an answer without it (or with another) is "the
    verifier's answer was not its own", and so is every later one: nothing it says is believed."""
    import jax
    import jax.numpy as jnp

    from pallasite.runner.judging import throwaway

    exported = jax.export.export(jax.jit(lambda x: x + 1), platforms=("cpu", "tpu"))(
        jax.ShapeDtypeStruct((8, 128), jnp.float32))
    blob, signature = exported.serialize(), [[[8, 128], "float32"]]
    real = throwaway.Throwaway()
    try:
        checked = real.check(blob, signature, "cpu")
        assert checked.facts is not None and not checked.crashed, checked  # the real one: its answers are its own
    finally:
        real.close()
    forger = str(UNTRUSTED / "forged_verifier.py")
    for made_up in ("", "0123456789abcdef0123456789abcdef"):
        monkeypatch.setattr(throwaway.Throwaway, "command",
                            staticmethod(lambda fd: [sys.executable, forger, str(fd), *([made_up] if made_up else [])]))
        forged = throwaway.Throwaway()
        try:
            first, second = forged.check(blob, signature, "cpu"), forged.check(blob, signature, "cpu")
        finally:
            forged.close()
        assert first.facts is None and first.crashed.startswith(throwaway.NOT_ITS_OWN), first
        assert second.facts is None and second.crashed.startswith(throwaway.NOT_ITS_OWN), second


def test_the_judge_ranks_nothing_a_forged_verifier_says(monkeypatch):
    """Through the judge (in this process): a verifier answering with a kernel's facts but not the request's
    secret makes a plain XLA add "rejected", never "ok"."""
    from pallasite.runner.judging import throwaway
    from pallasite.runner.judging.judge import judged_time

    forger = str(UNTRUSTED / "forged_verifier.py")
    monkeypatch.setattr(throwaway.Throwaway, "command", staticmethod(lambda fd: [sys.executable, forger, str(fd)]))
    result = judged_time({"path": str(UNTRUSTED / "xla_add_candidate.py"), "runs": 1, "warmup": 1, "shrink": True})
    assert result["verdict"] == "rejected", result
    assert [r["trick"] for r in result["rejections"]] == ["module_crashed"], result["rejections"]
    assert throwaway.NOT_ITS_OWN in result["rejections"][0]["message"], result["rejections"]


@pytest.mark.parametrize("confine", MODES)
async def test_a_judge_that_dies_running_the_candidates_program_says_so_and_ranks_nothing(tmp_path, confine):
    """After the candidate's process is gone the judge runs its exported program (with the reference beside it);
    a signal that ends the judge then is the candidate's program crashing it: the reply says so with the signal
    and the file, and no verdict is given (before: "the worker was killed by SIGSEGV while running the
    request"). The stand-in for such a program is a reference that crashes the judge at the second size."""
    user = (UNTRUSTED / "crashing_reference.py").read_text()
    (crashed,) = await judged(confine, tmp_path, [RIGHT], user=user)
    assert crashed.status == "crashed" and crashed.result is None, (crashed.status, crashed.message)
    assert crashed.message.startswith("the candidate's program crashed the judge (SIGSEGV)"), crashed.message
    assert "kernel.py's exported program" in crashed.message and "nothing is ranked" in crashed.message


# ---------------------------------------------------------------------------- where no namespace can be made


async def test_without_a_nested_namespace_the_users_own_file_is_judged_with_a_note(tmp_path):
    """No user namespaces for the candidate's process (forced): the user's own worker judges it as before (the
    process group and every process below it ended) and the record and notes say so."""
    from pallasite.engine.workers.client import WorkerClient, WorkerConfig
    from pallasite.engine.timing import TaskFiles, time_request
    from pallasite.runner.isolation.nest import NO_NEST_VARIABLE

    path = tmp_path / "kernel.py"
    path.write_text(USER)
    config = WorkerConfig(timeout_s=240, env={NO_NEST_VARIABLE: "forced by the test"})
    async with WorkerClient(config) as worker:
        reply = await worker.request(time_request(TaskFiles(str(path)), "time", runs=2, warmup=1))
    assert verdict(reply) == ("ok", [], "the judge"), reply.result
    isolation = reply.result.judge.isolation
    assert "without a PID namespace of its own here" in isolation and "forced by the test" in isolation, isolation
    assert isolation in reply.result.notes


@needs_namespaces
async def test_a_confined_worker_refuses_a_candidate_it_cannot_nest(tmp_path, monkeypatch):
    """Model-written code: where its process gets no PID namespace of its own, it is not judged - refused up front
    by the sandbox's probe (as a system without the sandbox is), and by the judge if it happens anyway."""
    from pallasite.runner.isolation.nest import NO_NEST_VARIABLE

    monkeypatch.setenv(NO_NEST_VARIABLE, "forced by the test")
    spawn.confinement_problem.cache_clear()
    try:
        problem = spawn.confinement_problem(sys.executable)
    finally:
        monkeypatch.delenv(NO_NEST_VARIABLE)
        spawn.confinement_problem.cache_clear()
    assert problem and "cannot be given a PID namespace of its own here" in problem and "forced by the test" in problem
    from pallasite.engine.workers.client import WorkerClient, WorkerConfig
    from pallasite.engine.timing import TaskFiles, time_request

    path = tmp_path / "kernel.py"
    path.write_text(USER)
    config = WorkerConfig(confine=True, timeout_s=240, env={NO_NEST_VARIABLE: "forced inside"})
    async with WorkerClient(config) as worker:  # (the probe ran without the variable: the judge meets it)
        reply = await worker.request(time_request(TaskFiles(str(path)), "time", runs=2, warmup=1, text=RIGHT,
                                                  trusted=(str(path), USER)))
    assert reply.ok and reply.result.verdict == "error", reply.result
    error = reply.result.error
    assert error.startswith("not judged: the candidate's process could not be given a PID namespace"), error
    assert "forced inside" in error and "ended before it ran anything" in error, error
    assert reply.result.candidate is None and reply.result.speedup is None
