"""A tiny stdio MCP server for the tests: `add` (reads only), `remember` (changes state), `fail`, and
`environment` (the names of the variables it was started with)."""

import os

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("tiny", log_level="WARNING")
notes: list[str] = []


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def remember(note: str) -> str:
    """Store a note and say how many are stored."""
    notes.append(note)
    return f"stored {len(notes)} note(s)"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def fail() -> str:
    """Always fails."""
    raise ValueError("the tiny server refuses")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def environment() -> str:
    """The names of this server's environment variables, one a line."""
    return "\n".join(sorted(os.environ))


if __name__ == "__main__":
    server.run()
