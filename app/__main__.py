"""The `moa-chat` command, and `python -m moa_chat`."""

from __future__ import annotations

import gc
import os
import sys


def main() -> int:
    # Python's collector runs every few hundred allocations, and a start-up makes a few hundred thousand objects
    # that live as long as the process: its passes find nothing and hold up the chat's first screen.
    # Paused before the first import; cli.main resumes it at once for every command but the chat, whose first
    # frame does (MoAChatApp.on_ready).
    gc.disable()
    from .cli import main as run
    from .cli.exit_codes import EXIT_READER_GONE

    try:
        return run()
    except BrokenPipeError:
        # The reader went away (`moa-chat presets | head -3`): that needs no traceback, and neither does the
        # flush of stdout into the same closed pipe when Python exits.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_READER_GONE


if __name__ == "__main__":
    raise SystemExit(main())
