"""Reference-GEM MCP servers (``gem.tools.mcp_server``) built on the official MCP Python SDK."""
