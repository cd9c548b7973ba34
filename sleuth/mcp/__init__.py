"""Sleuth as an MCP server: the registry's tools, policy and transcripts, for any MCP client.

`sleuth mcp` serves over stdio (the default) or streamable HTTP. Each client session is one
transcript; a mutating tool asks the user through elicitation when the client can, and
otherwise follows the host's rules.
"""
