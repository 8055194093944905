"""Where moa-chat keeps things: the config folder and the data folder."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "moa-chat"
HOME_ENV = "MOA_CHAT_HOME"


def config_home() -> Path:
    """The folder holding config.yaml: $MOA_CHAT_HOME, else the platform's user config folder."""
    home = os.environ.get(HOME_ENV)
    return Path(home).expanduser() if home else Path(platformdirs.user_config_dir(APP_NAME))


def data_home() -> Path:
    """The folder for the session database, traces and settings: $MOA_CHAT_HOME, else user data."""
    home = os.environ.get(HOME_ENV)
    return Path(home).expanduser() if home else Path(platformdirs.user_data_dir(APP_NAME))


def default_config_path() -> Path:
    return config_home() / "config.yaml"
