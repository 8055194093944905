"""Words that follow a count, written the same way by the command line, the chat and the prompts."""

from __future__ import annotations


def plural(count: int, noun: str, many: str | None = None) -> str:
    """`count` and its noun: "1 reference", "1,200 tokens"; `many` where adding an s is wrong ("entries")."""
    return f"{count:,} {noun if count == 1 else many or noun + 's'}"
