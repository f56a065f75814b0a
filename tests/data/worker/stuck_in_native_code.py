"""Blocks like native code that ignores interrupts: SIGINT is blocked, then a long sleep.
Only killing the worker stops it."""

import signal
import time

signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
time.sleep(600)
