"""Which tools a preset offers: its own `tools:`, else the global one, else everything available."""

from __future__ import annotations

from collections.abc import Iterable

from ..config import Config, Preset
from .builtin import builtin_tools
from .mcp_bridge import McpHub
from .registry import Tool, ToolRegistry
from .workspace import Workspace


def tools_for(
    config: Config,
    preset: Preset,
    workspace: Workspace,
    mcp: McpHub | None = None,
) -> tuple[ToolRegistry, list[str]]:
    """The registry for a turn on this preset: built-ins for the workspace plus started MCP servers' tools."""
    available = [*builtin_tools(workspace), *(mcp.tools() if mcp is not None else [])]
    return select_tools(available, config, preset)


def select_tools(available: Iterable[Tool], config: Config, preset: Preset) -> tuple[ToolRegistry, list[str]]:
    """The tools a preset offers: its own `tools:`, else the global one, else everything available.

    Entries name a built-in tool, an MCP tool by its full name, or an MCP server (all its tools).
    Returns the registry and warnings about names that match nothing.
    """
    available = list(available)
    wanted = preset.tools if preset.tools is not None else config.tools
    if wanted is None:
        return ToolRegistry.of(available), []
    chosen: dict[str, Tool] = {}
    warnings = []
    for name in wanted:
        matches = [tool for tool in available if name in (tool.name, tool.source)]
        if not matches:
            names = ", ".join(tool.name for tool in available) or "none"
            warnings.append(f"tools: no tool or MCP server named {name!r} (available: {names})")
        for tool in matches:
            chosen.setdefault(tool.name, tool)
    return ToolRegistry.of(chosen.values()), warnings
