"""What the references see, and what the aggregator is told about their answers."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from typing import Literal, Protocol

from ..llm.messages import ContentPart, Message, ToolCallPart, UserMessage, assistant, system, user
from ..prompts import (
    ADVISOR_PROMPT,
    CONTINUE_PROMPT,
    GUIDANCE_END,
    GUIDANCE_HEADER,
    LAYER_END,
    LAYER_HEADER,
    TOOL_RESULT_PREFIX,
    answer_heading,
    message_text,
    reference_heading,
)
from ..text.wording import plural
from .events import ReferenceFinished

# Long tool results are cut to head and tail: references need their gist, not every byte.
TOOL_RESULT_HEAD = 1500
TOOL_RESULT_TAIL = 500


def cut_middle(text: str, head: int = TOOL_RESULT_HEAD, tail: int = TOOL_RESULT_TAIL) -> str:
    if len(text) <= head + tail + 80:
        return text
    omitted = len(text) - head - tail
    return f"{text[:head]}\n… [{omitted:,} characters omitted] …\n{text[-tail:]}"


def _called(call: ToolCallPart, unnamed: str = "?") -> tuple[str, str]:
    """(name, arguments) of a tool call, as far as the message says."""
    function = call.get("function") or {}
    return str(function.get("name", unnamed)), str(function.get("arguments", "{}"))


def _tool_calls_text(calls: Sequence[ToolCallPart]) -> str:
    lines = []
    for call in calls:
        name, arguments = _called(call)
        lines.append(f"[called tool `{name}` with arguments {arguments}]")
    return "\n".join(lines)


def reference_view(messages: Sequence[Message]) -> list[Message]:
    """The conversation as references see it.

    The user's system prompt is left out (it is written for the acting model, tools and all); tool calls
    and results become plain text (references receive no tool schemas, and providers reject tool
    messages without them); consecutive turns of one role are merged (some chat templates insist on
    alternation); the view always ends on a user turn.
    """
    turns: list[tuple[Literal["user", "assistant"], str]] = []
    images: dict[int, list[ContentPart]] = {}  # a user turn's images, by the turn's place: kept as parts
    names: dict[str, str] = {}

    def add(role: Literal["user", "assistant"], text: str) -> None:
        if not text.strip():
            return
        if turns and turns[-1][0] == role:
            turns[-1] = (role, f"{turns[-1][1]}\n\n{text}")
        else:
            turns.append((role, text))

    for message in messages:
        if message["role"] == "user":
            content = message.get("content")
            pictures = (
                [part for part in content if part.get("type") == "image_url"] if isinstance(content, list) else []
            )
            add("user", _words(content) if pictures else message_text(content))
            if pictures:
                if not turns or turns[-1][0] != "user":
                    turns.append(("user", ""))
                images.setdefault(len(turns) - 1, []).extend(pictures)
        elif message["role"] == "assistant":
            calls = message.get("tool_calls") or []
            for call in calls:
                names[call.get("id", "")] = _called(call, "tool")[0]
            text = message_text(message.get("content"))
            add("assistant", "\n".join(part for part in (text, _tool_calls_text(calls)) if part))
        elif message["role"] == "tool":
            name = names.get(message.get("tool_call_id", ""), message.get("name") or "tool")
            add("user", f"{TOOL_RESULT_PREFIX} `{name}`]\n{cut_middle(message_text(message.get('content')))}")
    if not turns or turns[-1][0] != "user":
        add("user", CONTINUE_PROMPT)
    return [
        (_with_images(text, images[n]) if n in images else user(text)) if role == "user" else assistant(text)
        for n, (role, text) in enumerate(turns)
    ]


def _words(content: object) -> str:
    """The text parts of a content list (its images travel as parts of their own)."""
    return (
        message_text([part for part in content if part.get("type") != "image_url"]) if isinstance(content, list) else ""
    )


def _with_images(text: str, images: list[ContentPart]) -> UserMessage:
    parts: list[ContentPart] = [{"type": "text", "text": text}] if text else []
    return {"role": "user", "content": [*parts, *images]}


def reference_messages(messages: Sequence[Message], earlier: str | None = None) -> list[Message]:
    """A reference's request: the advisor prompt and the view; in a later layer, the earlier layer's
    answers (`layer_message`) join the last user turn, so roles still alternate (and its images stay)."""
    view = reference_view(messages)
    if earlier:
        content = view[-1]["content"]
        if isinstance(content, list):
            view[-1] = {"role": "user", "content": [*content, {"type": "text", "text": earlier}]}
        else:
            view[-1] = user(f"{message_text(content)}\n\n{earlier}")
    return [system(ADVISOR_PROMPT), *view]


def guidance_message(
    results: Sequence[ReferenceFinished], *, predates_tools: bool = False, anonymous: bool = False
) -> UserMessage:
    """The message placed after the history for the aggregator (after, so the prefix stays cacheable).

    It is a user-role message because several servers (llama.cpp templates among them) reject a system
    message anywhere but first. The answers appear in the order given (a preset may shuffle it), numbered
    in that order; `anonymous` leaves the model names out, so the aggregator cannot favour a name.
    """
    numbered = list(enumerate(results, start=1))
    answered = [(n, r) for n, r in numbered if r.status == "ok"]
    unavailable = [(n, r) for n, r in numbered if r.status != "ok"]

    def name(number: int, result: ReferenceFinished) -> str:
        return f"Reference {number}" if anonymous else f"Reference {number} — {result.label}"

    def heading(number: int, result: ReferenceFinished) -> str:
        return reference_heading(number, None if anonymous else result.label, _stopped_early(result))

    lines = [
        GUIDANCE_HEADER,
        "",
    ]
    if answered:
        lines += [
            f"{plural(len(answered), 'advisor model')} read this conversation and "
            "answered the latest request. They could not use tools or see anything beyond the conversation. "
            "Weigh their answers: keep what is right, fix what is wrong, fill gaps. Then reply to the user "
            "yourself, in your own voice, using tools where they help. Don't mention the advisors unless asked.",
        ]
    else:
        lines += [
            "No advisor answers are available for this turn: every reference model failed. Answer the user on "
            "your own.",
        ]
    if predates_tools:
        lines += [
            "",
            "Note: this guidance was written before the tool calls and results that follow the user's "
            "request. Calls already made have finished — do not repeat them; use their results.",
        ]
    for number, result in answered:
        lines += ["", heading(number, result), "", result.text.strip()]
    if unavailable:
        names = ", ".join(f"{name(n, r)} ({_STATUS_WORDS.get(r.status, r.status)})" for n, r in unavailable)
        lines += ["", f"Unavailable this turn: {names}."]
    lines += ["", GUIDANCE_END]
    return user("\n".join(lines))


# A reference the provider ended on purpose is whole as far as it goes, but may lack its end: the aggregator
# is told so beside its answer, so it does not take a missing conclusion for the advisor's whole view.
_STOPPED_EARLY = {
    "length": "stopped early: max_tokens reached",
    "content_filter": "stopped early by the provider's content filter",
}


def _stopped_early(result: ReferenceFinished) -> str:
    words = _STOPPED_EARLY.get(result.finish_reason or "")
    return f" ({words})" if words else ""


def layer_message(results: Sequence[ReferenceFinished], *, anonymous: bool = False) -> str:
    """What a reference of the next layer reads after the conversation: the previous layer's answers, to
    weigh critically rather than copy (some may be wrong)."""
    answered = [r for r in results if r.status == "ok"]
    lines = [
        LAYER_HEADER,
        "",
        "Other advisors answered the same request. Their answers follow. Some may be wrong, incomplete or "
        "biased: evaluate them critically, use what is right, correct what is not, and then write your own "
        "best answer to the user's request. Do not simply copy or summarise them.",
    ]
    for number, result in enumerate(answered, start=1):
        title = answer_heading(number, None if anonymous else result.label, _stopped_early(result))
        lines += ["", title, "", result.text.strip()]
    lines += ["", LAYER_END]
    return "\n".join(lines)


_STATUS_WORDS = {
    "failed": "failed",
    "timeout": "timed out",
    "cancelled": "cancelled",
    "late": "not waited for",
    "cut_off": "cut off",
}


def turn_key(messages: Sequence[Message]) -> str | None:
    """Identifies a user turn: the conversation up to and including its last user message."""
    for position in range(len(messages) - 1, -1, -1):
        if messages[position]["role"] == "user":
            return json.dumps(list(messages[: position + 1]), sort_keys=True, default=str)
    return None


def continues_after_user(messages: Sequence[Message]) -> bool:
    """True when the conversation goes on past its last user message (a tool-loop iteration)."""
    return bool(messages) and messages[-1]["role"] != "user"


def turn_hash(preset: str, messages: Sequence[Message]) -> str | None:
    """The key of the user turn `messages` belong to on `preset`, or None when there is no user message."""
    key = turn_key(messages)
    if key is None:
        return None
    return hashlib.sha256(f"{preset}\0{key}".encode()).hexdigest()


class GuidanceMemory(Protocol):
    """The references' answers of a user turn kept for its later rounds (`fanout: user_turn`), by `turn_hash`:
    a turn's own rounds (`LastGuidance`), or an API client's requests that continue one (api.GuidanceCache)."""

    def get(self, key: str) -> tuple[ReferenceFinished, ...] | None: ...

    def put(self, key: str, answers: tuple[ReferenceFinished, ...]) -> None: ...


class LastGuidance:
    """A `GuidanceMemory` of one user turn: the latest answers put."""

    def __init__(self) -> None:
        self._kept: tuple[str, tuple[ReferenceFinished, ...]] | None = None
        self._lock = threading.Lock()

    def get(self, key: str) -> tuple[ReferenceFinished, ...] | None:
        with self._lock:
            kept = self._kept
        return kept[1] if kept is not None and kept[0] == key else None

    def put(self, key: str, answers: tuple[ReferenceFinished, ...]) -> None:
        with self._lock:
            self._kept = (key, answers)
