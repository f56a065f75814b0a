"""Raises at import, on line 7 (1-based) of this file."""

BLOCK = (8, 128)


def fail():
    raise ValueError(f"block {BLOCK} is not allowed here")


fail()
