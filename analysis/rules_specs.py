"""Tier-0 rules (specs): filled in rule by rule, each after its fixture and expected.json."""

RULES: tuple = ()
