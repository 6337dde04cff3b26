"""Request streams for replay under load (numpy only): when each request arrives, which trace
prompt it asks (drawn uniformly, with replacement), and how many tokens it wants (at most its
trace's continuation). ``read_stream`` reads a CSV with a header or JSON lines, one request per
line with ``arrival_s``, ``prompt_id`` (a trace prompt's id) and ``output_tokens``.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simspec.errors import SimspecError

FIELDS = ("arrival_s", "prompt_id", "output_tokens")


@dataclass(frozen=True)
class Stream:
    arrival: np.ndarray  # [requests] seconds, non-decreasing
    prompt: np.ndarray  # [requests] trace prompt index
    output_tokens: np.ndarray | None = None  # [requests] wanted (None: each its continuation, up to the budget)
    meta: dict = field(default_factory=dict)  # how it was made: kind, rate, seed, source

    def __post_init__(self) -> None:
        if len(self.arrival) == 0:
            raise SimspecError("the request stream is empty: give it a longer duration, a higher rate, or a file "
                               "with requests")


def check_rate(rate: float) -> None:
    """One line for a rate that is not a positive number of requests per second."""
    if not rate > 0 or not np.isfinite(rate):
        raise SimspecError(f"--rate must be a positive number of requests per second, not {rate:g}")


def poisson(rate: float, duration_s: float, prompts: np.ndarray, seed: int = 0) -> Stream:
    """Arrivals at ``rate`` per second for ``duration_s`` seconds."""
    check_rate(rate)
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1 / rate, size=int(rate * duration_s * 1.5) + 16))
    arrival = arrival[arrival <= duration_s]
    return Stream(arrival, rng.choice(np.asarray(prompts), size=len(arrival)),
                  meta={"kind": "poisson", "rate": rate, "duration_s": duration_s, "seed": seed})


def bursty(rate: float, on_s: float, off_s: float, duration_s: float, prompts: np.ndarray, seed: int = 0) -> Stream:
    """Poisson at ``rate`` during each ``on_s``-second burst, nothing for ``off_s`` seconds after it
    (mean rate ``rate * on_s / (on_s + off_s)``)."""
    check_rate(rate)
    if not (on_s > 0 and off_s >= 0):
        raise SimspecError(f"a bursty stream needs on-periods > 0 s and off-periods >= 0 s, not {on_s:g} and {off_s:g}")
    period = on_s + off_s
    busy_time = poisson(rate, duration_s * on_s / period, prompts, seed)  # arrivals on the on-time's clock
    on = busy_time.arrival
    arrival = (on // on_s) * period + on % on_s
    keep = arrival <= duration_s
    return Stream(arrival[keep], busy_time.prompt[keep],
                  meta={"kind": "bursty", "rate": rate, "on_s": on_s, "off_s": off_s, "duration_s": duration_s,
                        "seed": seed})


def read_stream(path: str | Path, prompt_ids: list[str]) -> Stream:
    """A stream from a CSV or JSON-lines file (module docstring); ``prompt_ids``: the traces'."""
    path = Path(path)
    if not path.is_file():
        raise SimspecError(f"no request stream at {path}: give a CSV or JSON-lines file with fields "
                           f"{', '.join(FIELDS)}")
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    if lines and lines[0].lstrip().startswith("{"):
        records = []
        for n, line in enumerate(lines, 1):
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise SimspecError(f"{path} line {n}: not JSON ({exc.msg}); each line is one request with "
                                   f"{', '.join(FIELDS)}") from None
    else:
        records = list(csv.DictReader(lines))
    index = {pid: i for i, pid in enumerate(prompt_ids)}
    arrival, prompt, wanted = [], [], []
    for n, record in enumerate(records, 1):
        missing = [f for f in FIELDS if not isinstance(record, dict) or record.get(f) in (None, "")]
        if missing:
            raise SimspecError(f"{path} request {n}: missing field {missing[0]!r} (every request needs "
                               f"{', '.join(FIELDS)})")
        if str(record["prompt_id"]) not in index:
            raise SimspecError(f"{path} request {n}: prompt_id {record['prompt_id']!r} is not among the traces' "
                               f"prompts (e.g. {', '.join(prompt_ids[:3])})")
        try:
            arrival.append(float(record["arrival_s"]))
            wanted.append(int(record["output_tokens"]))
        except ValueError:
            raise SimspecError(f"{path} request {n}: arrival_s must be seconds and output_tokens a whole "
                               "number") from None
        prompt.append(index[str(record["prompt_id"])])
    order = np.argsort(np.array(arrival), kind="stable")
    if np.any(np.array(wanted) < 1) or np.any(np.array(arrival) < 0):
        raise SimspecError(f"{path}: every request needs arrival_s >= 0 and output_tokens >= 1")
    return Stream(np.array(arrival)[order], np.array(prompt)[order], np.array(wanted)[order],
                  meta={"kind": "file", "source": str(path)})
