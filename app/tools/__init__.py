"""Tools the aggregator can call: the registry, the built-ins, MCP servers, selection and approval."""

from .approval import Answering, ApprovalPolicy, ApprovalRequest, Approver, Decision, DeniedBy, Verdict
from .mcp_bridge import McpHub
from .registry import Tool, ToolError, ToolRegistry
from .selection import select_tools, tools_for
from .workspace import Workspace

__all__ = [
    "Answering",
    "ApprovalPolicy",
    "ApprovalRequest",
    "Approver",
    "Decision",
    "DeniedBy",
    "McpHub",
    "Tool",
    "ToolError",
    "ToolRegistry",
    "Verdict",
    "Workspace",
    "select_tools",
    "tools_for",
]
