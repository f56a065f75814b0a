# A hostile candidate's module-level code: it stops every clock of its process (perf_counter,
# perf_counter_ns, time, monotonic), so a judge timing it there would read 0 ns for every call.
import time as _time

_time.perf_counter = lambda: 0.0
_time.perf_counter_ns = lambda: 0
_time.time = lambda: 0.0
_time.time_ns = lambda: 0
_time.monotonic = lambda: 0.0
_time.monotonic_ns = lambda: 0
