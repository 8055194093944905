"""What is learned about models (a window an overflow named, a token calibration), kept for this process only:
where no session store keeps it (`ask --no-save`, eval's tasks, the API, the Python facade). The store's own
is `store.model_facts.ModelFacts`, which keeps them across processes."""

from __future__ import annotations

import threading

from .tokens import Calibration
from .windows import LearnedWindow


class ProcessFacts:
    """A `WindowMemory` and a `CalibrationMemory` in memory; safe between threads."""

    def __init__(self) -> None:
        self._windows: dict[tuple[str, str], LearnedWindow] = {}
        self._calibrations: dict[tuple[str, str], Calibration] = {}
        self._lock = threading.Lock()

    def learned_window(self, provider: str, model: str) -> LearnedWindow | None:
        with self._lock:
            return self._windows.get((provider, model))

    def learn_window(self, provider: str, model: str, learned: LearnedWindow) -> None:
        with self._lock:
            self._windows[(provider, model)] = learned

    def calibration(self, provider: str, model: str) -> Calibration | None:
        with self._lock:
            return self._calibrations.get((provider, model))

    def calibrate(self, provider: str, model: str, calibration: Calibration) -> None:
        with self._lock:
            self._calibrations[(provider, model)] = calibration


PROCESS_FACTS = ProcessFacts()  # this process's, for every session that has no store
