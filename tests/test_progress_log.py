"""Progress in a log file: a long run writes a line per interval and one when it ends; a short
one (a refused input, a test) writes nothing, so its log stays its result or its one error line."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

from simspec.report.progress_log import ProgressLog, duration


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_a_bar_in_a_log_writes_one_line_per_interval_and_one_at_its_end():
    stream, clock = io.StringIO(), Clock()
    log = ProgressLog(stream, every=60, clock=clock)
    advance = log.bar("teacher pass", 100)
    for step in range(100):
        clock.now = 7.0 * (step + 1)  # 700 s in all: lines at >= 60 s apart, then the last
        advance()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 11 + 1, lines   # 700 s / 63 s steps: 11 interval lines + the finished one
    assert lines[0].endswith("teacher pass: 9/100 (9 %), 1 min 03 s elapsed, eta 10 min 37 s"), lines[0]
    assert lines[-1].endswith("teacher pass: 100/100 (100 %), 11 min 40 s elapsed"), lines[-1]
    advance()  # past the end: nothing more
    assert len(stream.getvalue().splitlines()) == 12


def test_the_eta_follows_the_last_intervals_rate_not_a_resumed_runs_skipped_start():
    stream, clock = io.StringIO(), Clock()
    advance = ProgressLog(stream, every=60, clock=clock).bar("generation", 1000)
    clock.now = 1
    advance(500)                # what a resumed run finds stored: half of it, at once
    clock.now = 61
    advance(10)                 # then 10 per minute
    clock.now = 121
    advance(10)
    second = stream.getvalue().splitlines()[1]
    assert second.endswith("520/1,000 (52 %), 2 min 01 s elapsed, eta 48 min 00 s"), second


def test_a_short_run_writes_nothing_and_a_long_step_without_a_count_says_how_long():
    stream, clock = io.StringIO(), Clock()
    log = ProgressLog(stream, every=60, clock=clock)
    advance = log.bar("replay", 3)
    for t in (1, 2, 59):
        clock.now = t
        advance()
    with log.status("loading the target"):
        clock.now = 100
    assert stream.getvalue() == ""
    with log.status("building the corpus"):
        clock.now = 100 + 3 * 3600 + 7 * 60
    assert stream.getvalue().rstrip().endswith("building the corpus: 3 h 07 min")
    assert [duration(s) for s in (5, 65, 3599.6)] == ["5 s", "1 min 05 s", "1 h 00 min"]


def test_a_verb_whose_stderr_is_a_file_gets_log_lines_not_terminal_frames(tmp_path):
    """``run_with_progress`` under a non-terminal stderr takes the log path (rich's bars would be
    invisible there): with a zero interval ($SIMSPEC_PROGRESS_SECONDS) every advance is a line."""
    code = ("import simspec.report.console as c\n"
            "def work(bar, status):\n"
            "    tick = bar('work', 2)\n"
            "    tick(); tick()\n"
            "    return 7\n"
            "print(c.run_with_progress(work, threads=1))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "SIMSPEC_PROGRESS_SECONDS": "0"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "7"
    assert [line.split("] ", 1)[1] for line in result.stderr.splitlines()] == [
        "work: 1/2 (50 %), 0 s elapsed, eta 0 s", "work: 2/2 (100 %), 0 s elapsed"]


def test_the_progress_interval_is_a_number_of_seconds(monkeypatch):
    from simspec.errors import SimspecError
    from simspec.report.progress_log import every_seconds

    for value, seconds in (("", 60.0), ("0", 0.0), ("2.5", 2.5)):
        monkeypatch.setenv("SIMSPEC_PROGRESS_SECONDS", value)
        assert every_seconds() == seconds
    for value in ("soon", "-1", "nan"):
        monkeypatch.setenv("SIMSPEC_PROGRESS_SECONDS", value)
        with pytest.raises(SimspecError, match="SIMSPEC_PROGRESS_SECONDS must be a number of seconds >= 0"):
            every_seconds()
