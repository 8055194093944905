"""Small user settings moa-chat remembers between sessions (the theme), kept apart from config.yaml.

config.yaml is the user's hand-written file; rewriting it would lose their comments and layout, so what
the app itself chooses lives in settings.json beside the session data.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from .paths import data_home

logger = logging.getLogger(__name__)


def settings_path() -> Path:
    return data_home() / "settings.json"


def load_settings() -> dict[str, object]:
    try:
        data = json.loads(settings_path().read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        logger.warning("ignoring unreadable settings file %s: %s", settings_path(), exc)
        return {}
    return data if isinstance(data, dict) else {}


def save_setting(key: str, value: object) -> None:
    """Write one setting atomically (a crash mid-write never leaves a broken file)."""
    path = settings_path()
    data = load_settings()
    data[key] = value
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        logger.warning("could not save setting %s to %s: %s", key, path, exc)
