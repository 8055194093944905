"""moa-chat's own markers taken out of a model's reply: a small model that copies "[Mixture-of-Agents guidance
— …]" or "[Reference 2 — local:smollm2 #1]" from its guidance into its answer does not show them to the user,
store them, or have eval read a letter from them.

A marker is a whole line (prompts.MARKER_LINE). `EchoFilter` works on a stream: text passes through as it
arrives, except a line that starts like a marker, which is held until it ends and then dropped (a marker) or
let through (anything else). `without_echoes` is the same filter over a whole text, so the streamed reply and
the kept one agree.
"""

from __future__ import annotations

from ..prompts import MARKER_LINE, MARKER_STARTS

LONGEST_MARKER = 400  # a line longer than this is no marker: let it through rather than hold it


class EchoFilter:
    """The reply with moa-chat's marker lines removed, fed piece by piece."""

    def __init__(self) -> None:
        self._held = ""  # the current line, while it may still be a marker
        self._passing = False  # the current line is known not to be one: it goes through as it comes
        self._after_marker = False  # blank lines after a removed marker go with it
        self.removed = 0  # marker lines taken out

    def feed(self, text: str) -> str:
        """What of `text` can be shown now."""
        out: list[str] = []
        while text:
            line, newline, text = text.partition("\n")
            if self._passing:
                out.append(line + newline)
            else:
                self._held += line
                if newline:
                    out.append(self._line_ended(newline))
                elif not self._may_be_marker():
                    out.append(self._held)
                    self._held, self._passing, self._after_marker = "", True, False
            if newline:
                self._passing = False
        return "".join(out)

    def finish(self) -> str:
        """What was held at the end of the reply (nothing, if its last line was a marker)."""
        return self._line_ended("")

    def reset(self) -> None:
        """A fresh reply follows (a retry): forget the line held."""
        self._held, self._passing, self._after_marker = "", False, False

    def _line_ended(self, newline: str) -> str:
        if self._is_marker():
            self.removed += 1
            self._held, self._after_marker = "", True
            return ""
        held, self._held = self._held, ""
        if not held.strip() and self._after_marker:
            return ""
        self._after_marker = False
        return held + newline

    def _may_be_marker(self) -> bool:
        start = self._held.lstrip(" \t")
        if len(self._held) > LONGEST_MARKER:
            return False
        return not start or any(start.startswith(m) or m.startswith(start) for m in MARKER_STARTS)

    def _is_marker(self) -> bool:
        return bool(self._held) and MARKER_LINE.fullmatch(self._held) is not None


def without_echoes(text: str) -> str:
    """`text` without moa-chat's marker lines."""
    echoes = EchoFilter()
    return echoes.feed(text) + echoes.finish()
