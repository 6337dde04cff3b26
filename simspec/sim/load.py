"""Replay under load (numpy only): a request stream (``simspec.sim.stream``) served by continuous
batching through at most ``max_batch`` rows (``simspec.sim.queues``), with a policy or plainly.

A cycle runs at the smallest measured batch size that holds its busy rows (as a CUDA-graph server
pads to a captured size), priced by the curves there. Before every cycle the policy is told that
batch size and how many requests wait (``batch_size``, ``waiting``), so a load-aware rule can
switch speculation down as the batch fills. Per request: time to first token (queueing
included), time per output token after the first, end-to-end latency; over the stream:
throughput and goodput at a latency target.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simspec.policies.base import BatchPolicy
from simspec.sim.charge import DecisionCharge, as_charge
from simspec.sim.costmodel import CostModel
from simspec.sim.queues import run_queues
from simspec.sim.replay import Cycles, positions_limit
from simspec.sim.stream import Stream
from simspec.sim.traces import TraceSet


@dataclass(frozen=True)
class LoadResult:
    method: str
    arrival: np.ndarray  # [requests] seconds
    first_token: np.ndarray  # [requests] seconds, its prefill done
    finished: np.ndarray  # [requests] seconds, its last token out
    tokens: np.ndarray  # [requests] output tokens, the first included
    cycles: int

    @property
    def ttft(self) -> np.ndarray:
        return self.first_token - self.arrival

    @property
    def e2e(self) -> np.ndarray:
        return self.finished - self.arrival

    @property
    def tpot(self) -> np.ndarray:
        """Seconds per output token after the first (a one-token request: 0)."""
        return (self.finished - self.first_token) / np.maximum(self.tokens - 1, 1)

    @property
    def span(self) -> float:
        return float(self.finished.max() - self.arrival.min())

    @property
    def throughput(self) -> float:
        """Output tokens per second over the stream."""
        return float(self.tokens.sum() / self.span)

    def goodput(self, tpot_s: float, ttft_s: float | None = None) -> float:
        """Requests per second with time per output token <= ``tpot_s`` (and to first token <= ``ttft_s``)."""
        met = self.tpot <= tpot_s
        if ttft_s is not None:
            met &= self.ttft <= ttft_s
        return float(met.sum() / self.span)

    def summary(self, tpot_s: float | None = None, ttft_s: float | None = None) -> dict:
        p = {q: float(x) for q, x in zip((50, 90), np.percentile(self.tpot, [50, 90]))}
        row = {"method": self.method, "requests": len(self.arrival), "throughput_tokens_per_s": self.throughput,
               "tpot_p50_s": p[50], "tpot_p90_s": p[90], "ttft_p50_s": float(np.median(self.ttft)),
               "ttft_p90_s": float(np.percentile(self.ttft, 90)), "e2e_p50_s": float(np.median(self.e2e)),
               "cycles": self.cycles}
        if tpot_s is not None:
            row["goodput_requests_per_s"] = self.goodput(tpot_s, ttft_s)
        return row


TIE = 0.01  # metrics within 1 % of each other tie, and the next one decides


def better(a: dict, b: dict) -> int:
    """Whether the stream served as ``a`` (a summary with goodput) went better than as ``b`` (1), worse
    (-1) or alike (0): goodput, then throughput, then median TPOT, each settled only past ``TIE`` (at
    light load throughput is the arrivals' own; speculation buys latency)."""
    for key, sign in (("goodput_requests_per_s", 1), ("throughput_tokens_per_s", 1), ("tpot_p50_s", -1)):
        x, y = a[key], b[key]
        if abs(x - y) > TIE * max(abs(x), abs(y)):
            return sign if x > y else -sign
    return 0


def best_row(rows: list[dict]) -> dict:
    """The row that served best (``better``); the first of equals."""
    from functools import cmp_to_key

    return max(rows, key=cmp_to_key(better))


def replay_load(traces: TraceSet, cost: CostModel, policy: BatchPolicy | None, stream: Stream, max_batch: int,
                max_new_tokens: int | None = None, decision_seconds: float | DecisionCharge = 0.0,
                seed: int = 0, padded: bool = False) -> LoadResult:
    """Serve ``stream`` with ``policy`` (None: plain) through at most ``max_batch`` rows; ``cost``: the
    batch-1 model. At T > 0, ``seed`` draws acceptance (one draw). ``padded``: every cycle at
    ``max_batch`` rows, as simspec's engine runs them, not at the busy rows' bucket."""
    cost.at_batch(max_batch)  # a maximum batch the profile has no curves for: one line
    sizes = np.array([max_batch] if padded else [b for b in cost.batch_sizes if b <= max_batch])
    slots = np.asarray(stream.prompt)
    limit = positions_limit(traces, max_new_tokens)[slots]
    if stream.output_tokens is not None:
        limit = np.minimum(limit, np.asarray(stream.output_tokens) - 1)
    rng = np.random.default_rng(seed) if traces.sampled else None
    if policy is not None:  # one server: its rows share a rule's state (``reset_batch`` reads it)
        policy.batch_size = max_batch
    cycles = Cycles(traces, policy, as_charge(decision_seconds), slots, limit, len(slots), rng)
    step = cycles.plain_step if policy is None else cycles.step

    def at_load(busy: np.ndarray, position: np.ndarray, first: np.ndarray, waiting: np.ndarray):
        batch = int(sizes[np.searchsorted(sizes, len(busy))])
        if policy is not None:
            policy.batch_size, policy.waiting = batch, int(waiting.sum())
        return step(cost.at_batch(batch), busy, position, first)

    arrival = np.asarray(stream.arrival, dtype=float)
    run = run_queues(len(slots), max_batch, limit, cost.prefill(traces.prompt_lengths[slots]), at_load, arrival)
    return LoadResult("plain" if policy is None else policy.name, arrival, run.first_token, run.finished, limit + 1,
                      int(run.cycles.sum()))
