"""Never finishes importing: a Python-level busy loop (interruptible by cancel/deadline)."""

import time

while True:
    time.sleep(0.05)
