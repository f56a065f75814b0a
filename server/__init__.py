"""The front ends: the LSP server (the only code importing pygls/lsprotocol) and the CLI."""
