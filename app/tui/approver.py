"""The chat's approver: a tool call that needs the user's yes opens the approval dialog.

The session calls `ask` on the turn's thread; the dialog is pushed on the UI thread and its answer resolves the
future. When the turn is cancelled first, the session cancels the future and the dialog closes, denying.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import Any

from textual.app import App

from ..tools import ApprovalRequest, Decision
from .screens.approval import ApprovalScreen


class DialogApprover:
    def __init__(self, app: App[Any], clock: Callable[[], float] = time.monotonic) -> None:
        self.app = app
        # The dialog's quiet period runs on this clock: real time, or a test's.
        self._clock = clock

    def ask(self, request: ApprovalRequest) -> Future[Decision]:
        answer: Future[Decision] = Future()
        screen = ApprovalScreen(request, clock=self._clock)

        def decided(decision: Decision | None) -> None:
            with contextlib.suppress(InvalidStateError):  # already withdrawn
                answer.set_result(decision or "deny")

        def withdrawn(future: Future[Decision]) -> None:
            if future.cancelled():
                self.app.call_from_thread(close)

        def close() -> None:
            if screen.is_active or screen in self.app.screen_stack:
                screen.dismiss("deny")

        self.app.call_from_thread(self.app.push_screen, screen, decided)
        answer.add_done_callback(withdrawn)
        return answer
