"""APIs removed from or renamed in the installed jax (PLS007)."""


def check_apis(ctx):
    return ()
