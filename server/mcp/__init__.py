"""`pallasite mcp`: the Model Context Protocol server for coding agents (stdio only), on the official SDK.

``mcp_server`` (the server), ``mcp_schemas`` (each tool as data), ``mcp_tools`` (check, explain, chips, docs),
``mcp_judging`` (the tools that run kernel code: estimate, judge, tune), ``mcp_folder`` (the folder it serves).
"""
