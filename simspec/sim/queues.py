"""Rows and queues of requests, as the engine schedules them (numpy only): the loop every replay
runs, whatever decides a cycle (``simspec.sim.replay``) or prices it.

Each queue has ``batch`` rows and its requests in arrival order. Before every cycle a free row
takes the next request that has arrived by the queue's clock and prefills it alone (its first
token comes out of the prefill); a request with nothing to decode frees its row at once. A cycle
runs every busy row together and advances the clock; a done row frees after it. A queue with no
busy row jumps to its next arrival. The Python loop runs over cycles, never requests or queues.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# One cycle of the busy rows (sorted request slots, a queue's contiguous from ``first``) at their
# positions, with ``waiting`` requests per busy queue: each busy queue's seconds, each row's advance.
Step = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class QueueRun:
    seconds: np.ndarray  # [queues] in cycles
    prefill_seconds: np.ndarray  # [queues]
    cycles: np.ndarray  # [queues]
    idle_row_cycles: np.ndarray  # [queues] rows that rode along as padding, summed over cycles
    first_token: np.ndarray  # [slots] clock time its prefill ended (its first token)
    finished: np.ndarray  # [slots] clock time its last token came out


def run_queues(per_queue: int, batch: int, limit: np.ndarray, prefill: np.ndarray, step: Step,
               arrival: np.ndarray | None = None) -> QueueRun:
    """Serve every queue (slots ``q * per_queue`` onwards, each ``limit`` positions to decode and
    ``prefill`` seconds to prefill) through ``batch`` rows; ``arrival``: each slot's arrival time,
    non-decreasing within its queue (None: every request waits at time 0)."""
    n_queues = len(limit) // per_queue
    position = np.zeros(len(limit), dtype=np.int64)
    rows = np.full((n_queues, batch), -1)
    admitted = np.zeros(n_queues, dtype=np.int64)  # of each queue's requests, how many have had a row
    clock, seconds, prefilled = np.zeros(n_queues), np.zeros(n_queues), np.zeros(n_queues)
    cycles, idle = np.zeros(n_queues, dtype=np.int64), np.zeros(n_queues, dtype=np.int64)
    first_token, finished = np.full(len(limit), np.nan), np.full(len(limit), np.nan)
    base = np.arange(n_queues) * per_queue
    by_queue = None if arrival is None else arrival.reshape(n_queues, per_queue)
    while True:
        held = rows >= 0
        pending = admitted < per_queue
        if by_queue is not None:  # an empty queue waits for its next request
            empty = pending & ~held.any(1)
            clock[empty] = np.maximum(clock[empty], arrival[base[empty] + admitted[empty]])
            arrived = (np.searchsorted(by_queue[0], clock, side="right") if n_queues == 1
                       else (by_queue <= clock[:, None]).sum(1))
        else:
            arrived = np.full(n_queues, per_queue)
        fill = ~held & (np.cumsum(~held, axis=1) <= (arrived - admitted)[:, None])
        if fill.any():
            _admit(fill, rows, admitted, base, clock, prefill, prefilled, first_token)
            done = fill & (position[rows] >= limit[rows])
            if done.any():  # nothing to decode: done at its first token
                finished[rows[done]] = first_token[rows[done]]
                rows[done] = -1
            continue
        if not held.any():
            if not pending.any():
                break
            continue
        busy = np.sort(rows[held])
        queue = busy // per_queue
        first = np.flatnonzero(np.concatenate(([True], queue[1:] != queue[:-1])))
        stepped = queue[first]
        spent, advanced = step(busy, position[busy], first, arrived[stepped] - admitted[stepped])
        clock[stepped] += spent
        seconds[stepped] += spent
        cycles[stepped] += 1
        idle[stepped] += batch - np.append(first[1:], len(busy)) + first
        position[busy] += advanced
        done = held & (position[rows] >= limit[rows])
        finished[rows[done]] = clock[np.nonzero(done)[0]]
        rows[done] = -1
    return QueueRun(seconds, prefilled, cycles, idle, first_token, finished)


def _admit(fill: np.ndarray, rows: np.ndarray, admitted: np.ndarray, base: np.ndarray, clock: np.ndarray,
           prefill: np.ndarray, prefilled: np.ndarray, first_token: np.ndarray) -> None:
    """The next requests of each queue into its ``fill`` rows, prefilled one after the other."""
    queue, _ = np.nonzero(fill)
    slots = base[queue] + admitted[queue] + np.cumsum(fill, axis=1)[fill] - 1
    rows[fill] = slots
    spent = prefill[slots]
    total = np.cumsum(spent)
    starts = np.flatnonzero(np.concatenate(([True], queue[1:] != queue[:-1])))
    before = np.repeat(total[starts] - spent[starts], np.diff(np.append(starts, len(queue))))
    first_token[slots] = clock[queue] + total - before
    per_queue = np.bincount(queue, spent, len(clock))
    clock += per_queue
    prefilled += per_queue
    admitted += fill.sum(1)
