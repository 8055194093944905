"""The environment a command run by a tool gets: this process's, without its secrets.

A prompt-injected model that can run `env` or `printenv` must not read the user's API keys. Withheld:
every variable a provider names in `api_key_env`, and any whose name looks like a secret. The config's
`tool_env_allow:` lets named ones through (a GITHUB_TOKEN a build needs, say).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from ..config import Config

SECRET_NAME = re.compile(r"(^|_)(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|PRIVATE_KEY|ACCESS_KEY)(_|$)", re.I)


def secret_names(config: Config, environ: Mapping[str, str]) -> set[str]:
    named = {spec.api_key_env for spec in config.providers.values() if spec.api_key_env}
    looks = {name for name in environ if SECRET_NAME.search(name)}
    return (named | looks) - set(config.tool_env_allow)


def tool_environment(config: Config, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    environ = os.environ if environ is None else environ
    withheld = secret_names(config, environ)
    return {name: value for name, value in environ.items() if name not in withheld}
