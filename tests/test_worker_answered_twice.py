"""A request's sandboxed process answers once: a second result line (something in that process forged one
before or after the op's own) makes the worker refuse the request, never pass the first line on (issue 49:
the worker kept the first result line with the right id)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from pallasite.runner import worker as worker_mod
from pallasite.wire import protocol


@dataclass
class Outcome:
    code: int = 0
    memory_exceeded: bool = False
    killed_for: str | None = None
    setup_error: str | None = None


class Child:
    def __init__(self, lines):
        self.lines = lines

    def kill(self, why):
        pass

    def messages(self, deadline):
        yield from self.lines

    def outcome(self):
        return Outcome()


class Sandboxes:
    confined = True

    def __init__(self, lines):
        self.lines = lines

    def start(self, body):
        return Child(self.lines)


def replies(lines) -> list[dict]:
    read, write = os.pipe()
    w = worker_mod.Worker(write, sandboxes=Sandboxes(lines))
    w._run_sandboxed("r1", None, None, None, None)
    os.close(write)
    with os.fdopen(read) as f:
        return [json.loads(line) for line in f.read().splitlines()]


def test_a_second_result_for_the_same_request_is_refused():
    forged = protocol.result_ok("r1", {"verdict": "ok", "judged_by": "the judge"})
    real = protocol.result_ok("r1", {"verdict": "rejected"})
    (reply,) = replies([forged, real])
    assert reply["ok"] is False and "answered 2 times" in reply["error"]["message"], reply
    (single,) = replies([real])
    assert single["ok"] is True and single["result"] == {"verdict": "rejected"}
