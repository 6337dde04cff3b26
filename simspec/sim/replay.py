"""Exact replay of greedy speculative decoding on recorded traces (numpy only).

All prompts advance together, one cycle per loop iteration: each row's accepted length comes
from its trace at its current position, its time from the cost model, and its position moves
by accepted + 1, as the engine's does. The Python loop runs over cycles (at most the number
of new tokens), never over prompts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from simspec.sim.costmodel import CostModel
from simspec.sim.traces import TraceSet, accepted_lengths

# decide(rows, context_length, previous_accepted) -> (depth, size) arrays for those rows
Decide = Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass
class ReplayResult:
    seconds: np.ndarray  # [prompts] speculative decoding time after the prefill
    greedy_seconds: np.ndarray  # [prompts] plain greedy decoding of the same tokens after the prefill
    prefill_seconds: np.ndarray  # [prompts] the prompt's forward pass, which both pay
    tokens: np.ndarray  # [prompts] tokens produced after the first one
    cycles: np.ndarray  # [prompts]
    draft_calls: np.ndarray  # [prompts]

    @property
    def speedup(self) -> np.ndarray:
        """End to end, prefill included on both sides, as ``bench-engine`` measures it."""
        return (self.greedy_seconds + self.prefill_seconds) / (self.seconds + self.prefill_seconds)

    @property
    def tau(self) -> np.ndarray:
        return self.tokens / np.maximum(self.cycles, 1)


def positions_limit(traces: TraceSet, max_new_tokens: int | None) -> np.ndarray:
    """Roots each prompt decodes from: the recorded positions, capped at ``max_new_tokens - 1``."""
    counts = np.diff(traces.prompt_offsets)
    return counts if max_new_tokens is None else np.minimum(counts, max_new_tokens - 1)


def greedy_seconds(traces: TraceSet, cost: CostModel, limit: np.ndarray) -> np.ndarray:
    """Plain greedy decoding of the same positions: one target step per token."""
    out = np.zeros(traces.n_prompts)
    for i in range(traces.n_prompts):  # once per replay, not in the cycle loop
        rows = traces.prompt_positions(i)
        out[i] = cost.greedy(traces.context_length[rows][: limit[i]]).sum()
    return out


def replay(traces: TraceSet, cost: CostModel, decide: Decide, width: int | None = None,
           max_new_tokens: int | None = None) -> ReplayResult:
    width = width or traces.width
    if width != traces.width:
        raise ValueError(f"traces were recorded at width {traces.width}; cannot replay width {width}")
    limit = positions_limit(traces, max_new_tokens)
    start = traces.prompt_offsets[:-1]
    position = np.zeros(traces.n_prompts, dtype=np.int64)  # root index within each prompt
    previous = np.zeros(traces.n_prompts, dtype=np.int64)  # last cycle's accepted drafts
    seconds = np.zeros(traces.n_prompts)
    tokens = np.zeros(traces.n_prompts, dtype=np.int64)
    cycles = np.zeros(traces.n_prompts, dtype=np.int64)
    calls = np.zeros(traces.n_prompts, dtype=np.int64)
    active = position < limit
    while active.any():
        rows = np.flatnonzero(active)
        at = start[rows] + position[rows]
        context = traces.context_length[at]
        depth, size = decide(rows, context, previous[rows])
        depth = np.minimum(depth, traces.depth_max)
        size = np.minimum(size, capacity(depth, width))  # the engine verifies at most the whole tree
        accepted = accepted_lengths(traces.path_rank[at], depth, size)
        seconds[rows] += cost.cycle(depth, width, size, context, previous[rows] + 1)
        emitted = np.minimum(accepted + 1, limit[rows] - position[rows])  # the engine truncates at the budget
        tokens[rows] += emitted
        cycles[rows] += 1
        calls[rows] += np.maximum(depth - 1, 0)
        position[rows] += accepted + 1
        previous[rows] = accepted
        active = position < limit
    prefill = cost.prefill(traces.prompt_lengths)
    return ReplayResult(seconds, greedy_seconds(traces, cost, limit), prefill, tokens, cycles, calls)


def capacity(depth: np.ndarray, width: int) -> np.ndarray:
    """``tree_capacity`` over arrays: nodes of a full tree of ``depth`` levels."""
    return np.where(depth <= 1, 1, 1 + width + np.maximum(depth - 2, 0) * width * width)


def static(depth: int, size: int) -> Decide:
    def decide(rows, context, previous):
        return np.full(len(rows), depth), np.full(len(rows), size)

    return decide
