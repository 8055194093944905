"""Ending a finished command's process without the interpreter's teardown.

Once `ask` has written its reply there is nothing left to do, yet Python's exit still tears the interpreter
down: it runs the garbage collector over every object the command made (the openai SDK, httpx, the engine:
about 100,000 of them), clears every module and frees it all, one object at a time. Nothing outside the
process sees any of that, and it took most of the time between the reply and the exit (docs/performance.md).

`exit_now` does, in Python's order, what that exit does that can be seen from outside, then ends the process:

1. threads that are not daemons: Python's exit waits for them, so while one runs, the exit is left to Python;
2. the `atexit` handlers: the providers moa-chat started are stopped (a local model server is killed and
   reaped), logging is flushed, `weakref.finalize` callbacks run;
3. stdout and stderr are flushed; if that fails, the exit is again Python's (which reports it, status 120).

What it skips is the finalizers of objects still alive. So the caller first closes what must be closed:
`ask` stops its MCP servers (and reaps them) and closes the session store (its last writes checkpointed into
the database) before it returns; the files it writes (traces, a tool's writes) are closed as they are written.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading


def exit_now(code: int) -> int:
    """End the process now with exit status `code`; returns `code` instead when Python's own exit still has
    something to do that cannot be skipped (a thread to wait for, a stream that cannot be flushed)."""
    current = threading.current_thread()
    if any(thread is not current and not thread.daemon for thread in threading.enumerate()):
        return code
    atexit._run_exitfuncs()  # they run once: a normal exit after this finds none left
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return code
    os._exit(code)
