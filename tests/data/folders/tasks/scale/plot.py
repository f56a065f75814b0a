"""A helper with no Pallas at all (it would make a plot of the results)."""


def summary(values):
    return min(values), max(values)
