"""The `moa-chat` command, and `python -m moa_chat`."""

from __future__ import annotations

import gc
import os
import sys


def main() -> int:
    # Python's collector runs every few hundred allocations, and a start-up makes a few hundred thousand objects
    # that live as long as the process: its passes find nothing and hold up the chat's first screen.
    # Paused before the first import; cli.run resumes it at once for every command but the chat, whose first
    # frame does (MoAChatApp.on_ready).
    gc.disable()
    from .cli import build_parser, run
    from .cli.exit_codes import EXIT_READER_GONE
    from .cli.quick_exit import exit_now

    args = build_parser().parse_args()
    try:
        code = run(args)
    except BrokenPipeError:
        # The reader went away (`moa-chat presets | head -3`): that needs no traceback, and neither does the
        # flush of stdout into the same closed pipe when Python exits.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_READER_GONE
    except SystemExit as stop:  # `ask` stopped by a signal: 128 + its number
        if args.command != "ask" or not isinstance(stop.code, int):
            raise
        code = stop.code
    if args.command == "ask":
        # The reply is written, the turn's servers and commands are stopped, the store is closed: what is left
        # of Python's exit (tearing the interpreter down) is skipped.
        return exit_now(code)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
