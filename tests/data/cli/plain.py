"""Not a Pallas file: pallasite says nothing about it."""


def add(a, b):
    return a + b
