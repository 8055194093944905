"""moa-chat's own read-only tools in API mode (`moa-chat api --read-tools`).

A client of the API is a program, not a person at a dialog, so nothing here can say yes to a tool call:
the tools offered are the built-ins that only read (`read_file`, `list_directory`, `search_files`,
`fetch_url`) among those the preset selects, and a call that needs approval never runs. That covers the
tools that change something (`run_command`, `write_file`), which are never offered, and a reading call that
would still want a look (`fetch_url` to this machine or its network): a model that asks for either gets a
refusal as the tool's result. The client's own tools (the request's `tools`) are offered beside these; a
client tool of the same name wins, and its calls go back to the client as usual.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import cast

from ..config import Config, Preset
from ..engine import Cancelled, CancelToken, TurnEnv
from ..llm.messages import ToolSpec
from ..llm.stream import ToolCall
from ..tools import ToolRegistry, Workspace
from ..tools.builtin import builtin_tools
from ..tools.environment import tool_environment
from ..tools.registry import Tool
from ..tools.selection import select_tools

REFUSED = (
    "error: {name} does not run through moa-chat's API: it {why}, and an API request has no one to approve it. "
    "Only tools that read run here; answer without it, or ask the user to do it."
)
CANCELLED = "error: the turn was cancelled before this tool ran"


class OwnTools:
    """The built-in tools one preset offers through the API: those that read, run on the server."""

    def __init__(self, config: Config, preset: Preset, root: Path | None = None) -> None:
        workspace = Workspace(root or Path.cwd(), environment=tool_environment(config))
        selected, _ = select_tools(builtin_tools(workspace), config, preset)
        self.all: dict[str, Tool] = {tool.name: tool for tool in builtin_tools(workspace)}
        self.readers = ToolRegistry.of(tool for tool in selected.tools.values() if tool.read_only)

    def offered(self, client: Sequence[ToolSpec] | None) -> list[ToolSpec] | None:
        """The request's tools plus the readers whose names the client does not use; None when none."""
        names = client_names(client)
        own = [cast(ToolSpec, tool.schema()) for name, tool in self.readers.tools.items() if name not in names]
        return [*(client or []), *own] or None

    def ours(self, call: ToolCall, client: Sequence[ToolSpec] | None) -> bool:
        """Whether the server answers this call: one of its built-ins' names that the client does not use."""
        return call.name in self.all and call.name not in client_names(client)

    def run(self, call: ToolCall, cancel: CancelToken) -> str:
        """The call's result as the model reads it: the tool's output, its error, or a refusal."""
        if cancel.cancelled:
            return CANCELLED
        tool = self.readers.get(call.name)
        if tool is None:
            why = "changes things" if not self.all[call.name].read_only else "is not offered by this preset"
            return REFUSED.format(name=call.name, why=why)
        arguments, problem = call.parsed_arguments()
        if arguments is None:
            return f"error: {problem}. Call {call.name} again with a valid JSON object as arguments."
        reason = tool.approval_reason(arguments)
        if reason is not None:
            return REFUSED.format(name=call.name, why=f"needs approval for this call ({reason})")
        try:
            return tool.run(arguments, cancel)
        except Cancelled:
            raise
        except Exception as exc:  # a tool's fault is the model's news, not the end of the turn
            return f"error: {exc}"


def client_names(tools: Sequence[ToolSpec] | None) -> set[str]:
    names = set()
    for spec in tools or ():
        function = spec.get("function") if isinstance(spec, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.add(function["name"])
    return names


class ClientTools:
    """The API's `ToolRule` (session.tool_loop): the client's tools are offered and their calls go back to it;
    with `--read-tools` (`own`), moa-chat's read-only built-ins are offered beside them and run here."""

    def __init__(self, client: Sequence[ToolSpec] | None, own: OwnTools | None) -> None:
        self.client, self.own = client, own

    def offered(self) -> list[ToolSpec] | None:
        if self.own is not None:
            return self.own.offered(self.client)
        return list(self.client) if self.client else None

    def runs_here(self, call: ToolCall) -> bool:
        return self.own is not None and self.own.ours(call, self.client)

    def run(self, call: ToolCall, iteration: int, env: TurnEnv) -> str:
        assert self.own is not None, "only the server's own tools run here"
        return self.own.run(call, env.cancel)
