"""A project package whose subfolder sub/ has no __init__.py (a namespace package, as in tokamax)."""
