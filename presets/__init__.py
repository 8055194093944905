"""Bundled MoA presets, one YAML file per preset; the file name is the preset name."""
