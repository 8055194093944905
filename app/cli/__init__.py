"""The `moa-chat` command. With no subcommand it opens the TUI; `ask` runs one headless turn; `presets`,
`sessions` and `export` print what is configured and what was said; `serve` runs the chat in a browser.

Exit status: 0 success, 1 the turn failed, 2 a usage, configuration or session-store error (one line on
stderr), 130 interrupted.
"""

from .dispatch import main, run
from .parser import build_parser

__all__ = ["build_parser", "main", "run"]
