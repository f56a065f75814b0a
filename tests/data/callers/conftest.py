"""The fixture workspaces' own tests are data for pallasite's callers search, not tests of pallasite."""

collect_ignore_glob = ["*"]
