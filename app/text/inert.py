"""Text from models, tools and providers, made inert before it reaches a terminal.

A reply, a tool result or an error message may carry escape sequences: OSC 52 writes the clipboard,
OSC 0/2 retitle the window, CSI 2J wipes the screen, C1 CSI (U+009B) does the same in one byte. Shown raw,
any of them acts on the user's terminal. Tabs and newlines stay; every other control character becomes a
visible picture of itself (ESC shows as ␛), so nothing is lost from view and nothing acts.
"""

from __future__ import annotations

import json
import re
from typing import Any

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _picture(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)  # the Control Pictures block: ␀ … ␟ (ESC is ␛)
    if code == 0x7F:
        return "␡"
    return f"<U+{code:04X}>"  # C1 controls have no pictures


def inert(text: str) -> str:
    """`text` with every control character but tab and newline made visible and harmless."""
    if not text:
        return text
    text = text.replace("\r\n", "\n")
    return _CONTROL.sub(_picture, text)


def inert_json(value: Any, **dump: Any) -> str:
    """JSON that is safe to print: json escapes C0 controls already; C1 controls and DEL are escaped too."""
    text = json.dumps(value, **dump)
    return re.sub(r"[\x7f-\x9f]", lambda m: f"\\u{ord(m.group()):04x}", text)
