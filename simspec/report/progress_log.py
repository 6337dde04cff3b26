"""Progress for a log file, where rich draws no bars and a run of hours would say nothing: a bar
writes a line at most once per ``every`` seconds (``$SIMSPEC_PROGRESS_SECONDS``, default 60), and
one when it completes if it ran that long; a step without a count, one when it ends if it took that
long (a short run writes nothing)."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TextIO

from simspec.errors import SimspecError

EVERY_SECONDS = 60.0


def every_seconds() -> float:
    """``$SIMSPEC_PROGRESS_SECONDS`` (seconds between a bar's lines; 0: a line at every step), else 60."""
    value = os.environ.get("SIMSPEC_PROGRESS_SECONDS", "")
    try:
        seconds = float(value) if value else EVERY_SECONDS
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:
        raise SimspecError(f"SIMSPEC_PROGRESS_SECONDS must be a number of seconds >= 0, not {value!r}")
    return seconds


def duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``2 h 07 min``: what a person reads in a log."""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


@dataclass
class _Task:
    description: str
    total: int
    started: float
    done: int = 0
    written: float = 0.0  # when the last line was written (the start, before any)
    written_done: int = 0  # the count then: the eta's rate is the last interval's
    closed: bool = False


class ProgressLog:
    """``bar`` and ``status`` with ``run_with_progress``'s signatures, writing lines to ``stream``."""

    def __init__(self, stream: TextIO, every: float | None = None, clock=time.monotonic):
        self.stream, self.clock = stream, clock
        self.every = every_seconds() if every is None else every

    def _write(self, text: str) -> None:
        self.stream.write(f"[{time.strftime('%H:%M:%S')}] {text}\n")
        self.stream.flush()

    def _line(self, t: _Task, now: float) -> str:
        elapsed = now - t.started
        # a share of a point (a round of interleaved timings) counts as done only once whole
        text = f"{t.description}: {int(t.done):,}/{t.total:,}"
        if t.total > 0:
            text += f" ({100 * t.done / t.total:.0f} %)"
        text += f", {duration(elapsed)} elapsed"
        if t.written_done < t.done < t.total:
            # The last interval's rate, not the whole run's: a resumed pass counts what it skips
            # as done in its first seconds, which would promise an end far too early.
            rate = (t.done - t.written_done) / max(now - t.written, 1e-9)
            text += f", eta {duration((t.total - t.done) / rate)}"
        return text

    def bar(self, description: str, total: int):
        now = self.clock()
        t = _Task(description, int(total), now, written=now)

        def advance(n: int = 1, description: str | None = None) -> None:
            now = self.clock()
            t.done += n
            if description:
                t.description = description
            if t.closed:
                return
            # One line per interval; a finished bar's line once, if it ran that long.
            t.closed = t.done >= t.total > 0
            if now - (t.started if t.closed else t.written) >= self.every:
                self._write(self._line(t, now))
                t.written, t.written_done = now, t.done
        return advance

    @contextmanager
    def status(self, text: str):
        started = self.clock()
        try:
            yield
        finally:
            took = self.clock() - started
            if took >= self.every:
                self._write(f"{text}: {duration(took)}")
