"""Configuration: the typed model, config.yaml and the bundled presets, paths, and remembered settings."""

from .builtin_providers import BUILTIN_PROVIDERS, DEMO_PROVIDER
from .loader import load_config, load_config_text
from .model import (
    Config,
    ConfigError,
    McpServerConfig,
    Preset,
    ProviderConfig,
    Slot,
    UnknownPresetError,
)
from .paths import config_home, data_home, default_config_path
from .preset_parsing import bundled_presets

__all__ = [
    "BUILTIN_PROVIDERS",
    "DEMO_PROVIDER",
    "Config",
    "ConfigError",
    "McpServerConfig",
    "Preset",
    "ProviderConfig",
    "Slot",
    "UnknownPresetError",
    "bundled_presets",
    "config_home",
    "data_home",
    "default_config_path",
    "load_config",
    "load_config_text",
]
