"""Tier-0 rules (kernel): filled in rule by rule, each after its fixture and expected.json."""

RULES: tuple = ()
