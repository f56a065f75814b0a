"""Reads standard input at import, as an interactive script would: must not eat worker requests."""

import sys

FIRST_LINE = sys.stdin.readline()
ANSWER = input("continue? ")
