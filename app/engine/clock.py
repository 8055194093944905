"""The one clock every shown duration comes from, so tests (and snapshots) can freeze it."""

from __future__ import annotations

import time

monotonic = time.monotonic
