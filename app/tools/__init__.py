"""Tools the aggregator can call: the registry, the built-ins, MCP servers, selection and approval."""

from .approval import Answering, ApprovalPolicy, ApprovalRequest, ApprovalVerdict, Approver, Decision, DeniedBy
from .mcp_bridge import McpHub
from .registry import Tool, ToolError, ToolRegistry
from .selection import select_tools, tools_for
from .workspace import Workspace

__all__ = [
    "Answering",
    "ApprovalPolicy",
    "ApprovalRequest",
    "ApprovalVerdict",
    "Approver",
    "Decision",
    "DeniedBy",
    "McpHub",
    "Tool",
    "ToolError",
    "ToolRegistry",
    "Workspace",
    "select_tools",
    "tools_for",
]
