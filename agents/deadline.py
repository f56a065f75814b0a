"""A run's time budget that holds inside its phases (``--time-limit``, ``agent.maxSeconds``).

    deadline = Deadline(1800, "--time-limit")
    result = await deadline.within(evaluator.compile(candidate), "the compile phase of iteration 2", Stop)
    gate = deadline.pausing(gate)    # waiting for the user (step mode) does not count

``within`` awaits one phase (a model call, a compile, a test run, a measurement) for at most the time
left; when the budget runs out it cancels the phase (the worker running it is told to stop, and
killed if it does not: engine/workers/client.py) and raises ``stop(reason)``, the reason naming the limit and
the phase it ended: "time budget spent (--time-limit 60 s) in the compile phase of iteration 2".
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


class Deadline:
    def __init__(self, seconds: float, name: str) -> None:
        self.seconds, self.name = float(seconds), name
        self.end = time.monotonic() + self.seconds

    def left(self) -> float:
        return self.end - time.monotonic()

    def reason(self, where: str) -> str:
        return f"time budget spent ({self.name} {self.seconds:g} s) in {where}"

    async def within(self, awaitable: Awaitable[T], where: str, stop: Callable[[str], Exception]) -> T:
        """``awaitable`` within the time left; ``stop(reason)`` is raised when the budget ends first."""
        left = self.left()
        if left <= 0:
            if asyncio.iscoroutine(awaitable):
                awaitable.close()  # never started
            raise stop(self.reason(where))
        try:
            return await asyncio.wait_for(awaitable, left)
        except asyncio.TimeoutError:
            raise stop(self.reason(where)) from None

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Time spent inside (waiting for the user) is not spent from the budget."""
        started = time.monotonic()
        try:
            yield
        finally:
            self.end += time.monotonic() - started

    def pausing(self, ask: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
        """``ask`` (a step-mode gate) with its waiting ``paused``."""
        async def paused_ask(*args: Any, **kwargs: Any) -> T:
            with self.paused():
                return await ask(*args, **kwargs)

        return paused_ask


def bounded(deadline: Deadline | None, awaitable: Awaitable[Any], where: str, stop: Callable[[str], Exception]) -> Awaitable[Any]:
    """``deadline.within(...)``, or the awaitable itself without a deadline."""
    return awaitable if deadline is None else deadline.within(awaitable, where, stop)
