"""The serving engines' own speculation settings as baselines: what a user gets without training
anything. Their chains (top-k 1) are, as every chain in simspec, the V = D best nodes of the tree.

- ``sglang-adaptive``: SGLang's adaptive speculative decoding (``--speculative-adaptive``,
  ``python/sglang/srt/speculative/adaptive_spec_params.py``). An exponential average of the
  accepted drafts per request (weight 0.2 on the newest verify, started at steps - 1) moves the
  number of draft steps along a ladder of candidates: after 10 warm-up verifies, every 5th one
  steps down while the average sits at or under the lower candidate - 0.5 + the down hysteresis
  (0.5 when the lower candidate is 0), else up while it exceeds the current one - 0.5 + the up
  hysteresis. Steps 0 is no drafting; from there the next decision probes the next candidate.
  The ladder and hystereses depend on the batch size: bands keyed by their smallest batch size.
  A server's batch shares one average; replay's rows are sequences decoded alone, one each.
- ``vllm-schedule``: vLLM's ``num_speculative_tokens_per_batch_size``, inclusive ``[start, end,
  K]`` ranges (K = 0: no drafting; past the last range its K); K tuned on the train split at the
  batch size validated (``simspec tune --engine vllm`` writes the whole schedule).
- ``trtllm-schedule``: TensorRT-LLM's ``draft_len_schedule`` with its acceptance-rate switch-off
  (``DecodingBaseConfig``): a batch of b rows drafts the length of the smallest scheduled batch
  size >= b, none past the largest (speculation off: its max-concurrency control); once the mean
  of accepted / drafted tokens over the last ``acceptance_rate_window_size`` iterations that
  drafted falls below ``acceptance_rate_threshold``, speculation stays off. One state per server
  (every row of a batch); replay's independent rows at batch 1 each have their own. Tuned: the
  length for batches up to 4 (K, then max(K - 1, 1) up to 8, off beyond), window 16, threshold
  none or 0.3 (TensorRT-LLM leaves both to the user).
- ``queue-aware``: simspec's load-aware rule: the grid-best static tree while no request waits
  for a row (``BatchPolicy.waiting``, set under load only), plain decoding once one does.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from simspec.policies.base import BatchPolicy
from simspec.policies.registry import RuleContext, register_baseline


@dataclass(frozen=True)
class Band:
    """Adaptive speculation's setting for batch sizes from ``start`` up to the next band."""

    start: int
    steps: tuple[int, ...]  # the ladder of draft steps, ascending
    up: float = 0.0  # hysteresis added to the threshold for a step up
    down: float = -0.25  # ... and for a step down


# SGLang's shipped per-batch-size configuration (candidate_steps, up/down hysteresis).
SGLANG_BANDS = (Band(1, (1, 3, 7), 0.0, -0.25), Band(8, (0, 1, 3), 0.0, 0.0), Band(32, (0, 1), 0.0, 0.0),
                Band(64, (0,), 0.0, 0.0))
EMA_ALPHA, WARMUP, INTERVAL = 0.2, 10, 5


class SGLangAdaptive(BatchPolicy):
    """SGLang's adaptive draft steps over ``bands`` (ladders capped at the traces' depth)."""

    def __init__(self, bands: tuple[Band, ...], width: int, depth_max: int, label: str = "default") -> None:
        self.width, self.depth_max = width, depth_max
        self.bands = tuple(Band(b.start, tuple(sorted({min(s, depth_max - 1) for s in b.steps})), b.up, b.down)
                           for b in bands)
        self.name = f"sglang-adaptive({label})"

    def band(self) -> Band:
        return self.bands[max(0, bisect.bisect_right([b.start for b in self.bands], self.batch_size) - 1)]

    def reset_batch(self, n):
        # A batch of B shares one state (slot 0); replay's independent rows each have their own.
        slots = 1 if self.batch_size > 1 else n
        self.ladder = self.band()
        self.rung = np.zeros(slots, dtype=np.int64)  # index into the ladder: starts at its first
        first = self.ladder.steps[0]
        self.average = np.full(slots, first - 1.0)
        self.verifies = np.zeros(slots, dtype=np.int64)

    def _slots(self, rows):
        return np.zeros(1, dtype=np.int64) if self.batch_size > 1 else rows

    def plan_batch(self, rows, context):
        steps = np.asarray(self.ladder.steps)[self.rung[self._slots(rows)]]
        steps = np.broadcast_to(steps, (len(rows),)) + 1
        return steps.copy(), steps.copy()

    def observe_batch(self, rows, depth, size, accepted):
        slots = self._slots(rows)
        mean = np.array([accepted.mean()]) if self.batch_size > 1 else accepted.astype(np.float64)
        self.average[slots] = (1 - EMA_ALPHA) * self.average[slots] + EMA_ALPHA * mean
        self.verifies[slots] += 1
        due = (self.verifies[slots] > WARMUP) & ((self.verifies[slots] - WARMUP) % INTERVAL == 0)
        for slot in slots[due]:
            self.rung[slot] = self._decide(int(self.rung[slot]), float(self.average[slot]))

    def _decide(self, rung: int, average: float) -> int:
        steps, band = self.ladder.steps, self.ladder
        if steps[rung] == 0 and rung + 1 < len(steps):
            return rung + 1  # no drafting measures nothing: probe the next candidate
        moved = False
        while rung > 0 and average <= (steps[rung - 1] - 0.5 if steps[rung - 1] > 0 else 0.5) + band.down:
            rung, moved = rung - 1, True
        while not moved and rung + 1 < len(steps) and average > steps[rung] - 0.5 + band.up:
            rung += 1
        return rung


class ChainSchedule(BatchPolicy):
    """vLLM's per-batch-size number of speculative tokens: a chain of K drafts, K by range."""

    def __init__(self, ranges: tuple[tuple[int, int, int], ...], width: int) -> None:
        self.ranges, self.width = tuple(sorted(ranges)), width
        spans = [f"{a}+" if b >= 1 << 20 else f"{a}-{b}" for a, b, _ in self.ranges]
        self.name = "vllm-schedule(" + ",".join(f"{span}:K={k}" for span, (*_, k) in zip(spans, self.ranges)) + ")"

    def tokens(self) -> int:
        for start, end, k in self.ranges:
            if start <= self.batch_size <= end:
                return k
        return self.ranges[-1][2]

    def plan_batch(self, rows, context):
        chain = np.full(len(rows), self.tokens() + 1)
        return chain, chain.copy()


LADDERS = ("default", (1, 2, 3), (1, 2, 4), (1, 3, 5), (2, 4, 6))


@register_baseline("sglang-adaptive", help="SGLang's adaptive draft steps: an average of accepted drafts moves "
                   "along a ladder per batch size", grid=LADDERS, timing_value="default", sized=False)
def sglang_adaptive(ctx: RuleContext, ladder) -> SGLangAdaptive:
    if ladder == "default":
        return SGLangAdaptive(SGLANG_BANDS, ctx.width, ctx.depth_max)
    # another ladder for the bands that draft; the largest batches keep speculation off
    bands = tuple(Band(b.start, ladder if b.steps != (0,) else b.steps, b.up, b.down) for b in SGLANG_BANDS)
    return SGLangAdaptive(bands, ctx.width, ctx.depth_max, "steps " + ",".join(map(str, ladder)))


@register_baseline("vllm-schedule", help="vLLM's chain of K drafts per batch-size range, K tuned",
                   grid=(0, 1, 2, 3, 4, 5, 7), timing_value=3, sized=False, charged_as="static")
def vllm_schedule(ctx: RuleContext, tokens: int) -> ChainSchedule:
    return ChainSchedule(((1, 1 << 30, min(tokens, ctx.depth_max - 1)),), ctx.width)


class DraftLenSchedule(BatchPolicy):
    """TensorRT-LLM's draft length by batch size, switched off for good below an acceptance rate."""

    def __init__(self, schedule: dict[int, int], width: int, depth_max: int, threshold: float | None = None,
                 window: int = 16) -> None:
        self.schedule = dict(sorted(schedule.items()))
        self.width, self.depth_max, self.threshold, self.window = width, depth_max, threshold, window
        spans = ",".join(f"<={b}:{k}" for b, k in self.schedule.items())
        self.name = f"trtllm-schedule({spans}" + (f",off<{threshold:g}" if threshold is not None else "") + ")"

    def draft_len(self) -> int:
        fits = [k for b, k in self.schedule.items() if b >= self.batch_size]
        return min(fits[0], self.depth_max - 1) if fits else 0

    def reset_batch(self, n):
        slots = 1 if self.batch_size > 1 else n  # a server's state; replay's rows at batch 1 each their own
        self.off = np.zeros(slots, dtype=bool)
        self.history = np.zeros((slots, self.window, 2))  # (accepted, drafted) of the last iterations that drafted
        self.seen = np.zeros(slots, dtype=np.int64)

    def _slots(self, rows):
        return np.zeros(len(rows), dtype=np.int64) if len(self.off) == 1 else np.asarray(rows)

    def plan_batch(self, rows, context):
        chain = np.where(self.off[self._slots(rows)], 0, self.draft_len()) + 1
        return chain, chain.copy()

    def observe_batch(self, rows, depth, size, accepted):
        drafted = np.asarray(depth) - 1
        slots = self._slots(rows)
        if self.threshold is None or not drafted.any():
            return
        for slot in np.unique(slots[drafted > 0]):  # one iteration per server: its rows summed
            mine = (slots == slot) & (drafted > 0)
            self.history[slot, self.seen[slot] % self.window] = accepted[mine].sum(), drafted[mine].sum()
            self.seen[slot] += 1
            if self.seen[slot] >= self.window:
                totals = self.history[slot].sum(0)
                self.off[slot] |= totals[0] / totals[1] < self.threshold


@register_baseline("trtllm-schedule", help="TensorRT-LLM's draft length per batch size (off past the schedule), "
                   "switched off below an acceptance rate", grid=tuple((k, t) for t in (None, 0.3)
                                                                       for k in (1, 2, 3, 4, 5, 7)),
                   timing_value=(3, 0.3), sized=False, charged_as="static")
def trtllm_schedule(ctx: RuleContext, setting: tuple[int, float | None]) -> DraftLenSchedule:
    k, threshold = setting
    return DraftLenSchedule({4: k, 8: max(k - 1, 1)}, ctx.width, ctx.depth_max, threshold)


class QueueAware(BatchPolicy):
    """``tree`` while at most ``most_waiting`` requests wait for a row; plain steps beyond."""

    def __init__(self, tree: BatchPolicy, most_waiting: int = 0) -> None:
        self.tree, self.most_waiting, self.width = tree, most_waiting, tree.width
        self.name = f"queue-aware({tree.name}, plain past {most_waiting} waiting)"

    def plan_batch(self, rows, context):
        if self.waiting > self.most_waiting:
            plain = np.ones(len(rows), dtype=np.int64)
            return plain, plain.copy()
        return self.tree.plan_batch(rows, context)


@register_baseline("queue-aware", help="the grid-best tree while no request waits for a row, plain decoding once "
                   "one does", sized=False, charged_as="static")
def queue_aware(ctx: RuleContext, _=None) -> QueueAware:
    return QueueAware(ctx.grid_best())
