"""Isolation: where model-written and user code runs (worker side).

The sandbox (``sandbox``: namespaces, no network, the user's files out of reach; ``sandbox_cgroup``: memory and
process limits; ``sandbox_server``: the fork server its children come from), ``confine`` (what a confined
request may see) and ``process_tree`` (ending every process a request started).
"""
