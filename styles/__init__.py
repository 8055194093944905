"""Bundled Textual stylesheets (one per screen or widget family), read with importlib.resources."""
