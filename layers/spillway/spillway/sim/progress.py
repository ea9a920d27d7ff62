"""A progress bar on stderr for long replays; no dependency, redrawn at most a few times a second."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    """``label [#########.........]  45%  day 49.2 of 109.0  12.3 s`` on one line, redrawn in place."""

    def __init__(self, total_seconds: int, stream: TextIO | None = None, width: int = 30) -> None:
        self.total = max(1, total_seconds)
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.label = ""
        self.started = time.perf_counter()
        self._last_draw = 0.0

    def begin(self, label: str) -> None:
        self.label = label
        self.started = time.perf_counter()
        self._last_draw = 0.0
        self.update(0, force=True)

    def update(self, t: int, force: bool = False) -> None:
        now = time.perf_counter()
        if not force and now - self._last_draw < 0.2:
            return
        self._last_draw = now
        share = min(1.0, max(0.0, t / self.total))
        filled = int(share * self.width)
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(
            f"\r{self.label:<20} [{bar}] {100 * share:3.0f}%  day {t / 86400:6.1f} of {self.total / 86400:.1f}"
            f"  {now - self.started:6.1f} s"
        )
        self.stream.flush()

    def end(self, t: int) -> None:
        self.update(t, force=True)
        self.stream.write("\n")
        self.stream.flush()
