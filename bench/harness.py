"""What the bench scripts share (each runs as `python bench/NAME.py`, so this folder is on the path)."""

from __future__ import annotations

import inspect
from typing import Any


def as_run_app(app_class: type) -> dict[str, Any]:
    """The options run_app starts the app with that a test leaves off (freeze_heap: the process is the app's
    alone), where this copy of the package has them (a --tree copy from before may not)."""
    return {"freeze_heap": True} if "freeze_heap" in inspect.signature(app_class).parameters else {}
