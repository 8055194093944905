"""The environment a command run by a tool (or an MCP server) gets: built from an allowlist, never this
process's whole environment.

A prompt-injected model that can run `env` must not read the user's secrets, and a blocklist of secret-looking
names misses most of them (`PGPASSWORD`, `DATABASE_URL=postgres://user:password@…`, `SLACK_WEBHOOK_URL`). So
by default (`tool_env: core`) a command gets only what commands need to behave (`CORE`: the search path, the
user and home, the locale, the terminal, the temporary folder) plus the names `tool_env_allow:` lists (a
GITHUB_TOKEN a build needs, say). `tool_env: all` passes everything but the variables holding the providers'
keys, for those who want it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..config import Config

CORE = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "USERNAME",
        "LOGNAME",
        "SHELL",
        "PWD",
        "LANG",
        "LANGUAGE",
        "TERM",
        "COLORTERM",
        "NO_COLOR",
        "TMPDIR",
        "TEMP",
        "TMP",
        "TZ",
        "EDITOR",
        "VISUAL",
        "PAGER",
    }
)
CORE_PREFIXES = ("LC_",)  # LC_ALL, LC_CTYPE, …


def provider_key_names(config: Config) -> set[str]:
    return {spec.api_key_env for spec in config.providers.values() if spec.api_key_env}


def tool_environment(config: Config, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    environ = os.environ if environ is None else environ
    allowed = set(config.tool_env_allow)
    if config.tool_env == "all":
        keys = provider_key_names(config) - allowed
        return {name: value for name, value in environ.items() if name not in keys}
    return {
        name: value
        for name, value in environ.items()
        if name in CORE or name.startswith(CORE_PREFIXES) or name in allowed
    }
