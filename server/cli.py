"""The `pallasite` command line (filled in below)."""


def main(argv=None) -> int:
    return 0
