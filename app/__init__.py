"""moa-chat: a terminal chat for Mixture-of-Agents conversations."""

__version__ = "0.1.0"
