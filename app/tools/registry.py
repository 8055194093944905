"""The tool registry: what the aggregator may call, described for the model and run for real."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar, overload

from ..engine.cancel import CancelToken

# The JSON object a model sends as a call's arguments: open, so each tool checks what it reads
# (required, optional below).
ToolArguments = dict[str, object]
# A JSON schema, as the chat completions API takes one for a tool's parameters.
JsonSchema = dict[str, object]
Value = TypeVar("Value")


class ToolError(Exception):
    """A tool could not do what was asked; the message goes back to the model as the result."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: JsonSchema  # of the arguments object
    read_only: bool  # False: it changes something, so it needs the user's approval
    run: Callable[[ToolArguments, CancelToken], str]
    make_preview: Callable[[ToolArguments], str | None] | None = None
    source: str = "built-in"  # or the MCP server's name
    # For a tool that only reads: a reason this particular call should still be approved, or None.
    asks_when: Callable[[ToolArguments], str | None] | None = None

    def approval_reason(self, arguments: ToolArguments) -> str | None:
        """None: the call runs freely. "": it changes something (the preview shows what). Otherwise why a
        call that only reads still wants a look."""
        if not self.read_only:
            return ""
        if self.asks_when is None:
            return None
        try:
            return self.asks_when(arguments)
        except Exception as exc:  # when in doubt, ask
            return f"could not tell whether this call is safe ({type(exc).__name__}: {exc})"

    def schema(self) -> dict[str, object]:
        """The tool as the chat completions API lists it: {"type": "function", "function": {...}}."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def preview(self, arguments: ToolArguments) -> str | None:
        if self.make_preview is None:
            return None
        try:
            return self.make_preview(arguments)
        except ToolError as exc:
            return f"(no preview: {exc})"
        except Exception as exc:  # a preview is a courtesy: it must never stand between the user and the choice
            return f"(no preview: {type(exc).__name__}: {exc})"


@dataclass
class ToolRegistry:
    tools: dict[str, Tool] = field(default_factory=dict)

    @classmethod
    def of(cls, tools: Iterable[Tool]) -> ToolRegistry:
        return cls({tool.name: tool for tool in tools})

    def __len__(self) -> int:
        return len(self.tools)

    def names(self) -> list[str]:
        return list(self.tools)

    def schemas(self) -> list[dict[str, object]]:
        return [tool.schema() for tool in self.tools.values()]

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)


@overload
def required(arguments: ToolArguments, key: str) -> str: ...
@overload
def required(arguments: ToolArguments, key: str, kind: type[Value]) -> Value: ...
def required(arguments: ToolArguments, key: str, kind: type[object] = str) -> object:
    """The argument `key`, which must be there and of type `kind` (a string unless said otherwise)."""
    value = arguments.get(key)
    if value is None:
        raise ToolError(f"missing required argument {key!r}")
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ToolError(f"argument {key!r} must be {kind.__name__}, not {type(value).__name__}")
    return value


def optional(arguments: ToolArguments, key: str, kind: type[Value], default: Value) -> Value:
    """The argument `key` if given (of type `kind`; a whole float counts as an int), else `default`."""
    value = arguments.get(key, default)
    if value is None:
        return default
    if kind is int and isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ToolError(f"argument {key!r} must be {kind.__name__}, not {type(value).__name__}")
    return value


def summarize_arguments(arguments: str, width: int = 60) -> str:
    """`path=README.md, end_line=40` from the JSON arguments, shortened to one line."""
    try:
        value = json.loads(arguments or "{}")
    except (ValueError, RecursionError):  # nested past the parser's depth is not a JSONDecodeError
        text = " ".join(arguments.split())
    else:
        if isinstance(value, dict):
            text = ", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in value.items())
            text = " ".join(text.split())
        else:
            text = json.dumps(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def pretty_arguments(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments or "{}"), indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):
        return arguments
