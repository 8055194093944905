"""`moa-chat mcp`: the panel as an MCP server's tools, for any MCP client (Claude Code, Claude Desktop, Cursor, Zed)."""
