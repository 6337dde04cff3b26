"""Replay of speculative decoding on recorded traces (numpy only), by the rules of the real
engine (``simspec.engine.speculative``), so that its cycles are the engine's cycles: exact for
greedy traces, Monte Carlo at T > 0.

Prompts decode as queues through ``batch`` rows (``simspec.sim.queues``): at batch 1 every
prompt is its own queue; at batch B one queue holds them all, or a caller passes several.

- A row decodes one prompt; then the queue's next prompt is prefilled into it alone. Once the
  queue is empty a free row idles as padding: every cycle is a batch-B forward.
- Each row's accepted length comes from its trace at its position (greedy: off the greedy path;
  T > 0: drawn from the tree's accepted-length law, the next tree the one recorded at that
  position of the sampled continuation; the tokens are not re-sampled).
- A cycle drafts as deep as its queue's deepest row (one padded draft forward per level, the
  first feeding each drafting row's tokens committed since it last drafted; the draft head
  scores only the rows still drafting, priced at that many rows where the profile measured them)
  and verifies every tree in one forward padded to the largest V at the longest context, priced
  at batch B, plus one policy decision charged at the deepest tree.
- A cycle in which no row of a queue drafts is the engine's plain step; its tokens wait for the
  row's next draft, whose first level feeds them all. Plain decoding runs the same queues.

Speedup is plain decoding's time over the method's, prefills included on both sides: the same
tokens, so at batch B the throughput ratio a server sees.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import partial

import numpy as np

from simspec.errors import SimspecError
from simspec.policies.base import BatchPolicy, drafted_depths, overrides, tree_capacities
from simspec.policies.shape import TreeShape
from simspec.sim.charge import DecisionCharge, as_charge
from simspec.sim.costmodel import CostModel
from simspec.sim.queues import run_queues
from simspec.sim.traces import TraceSet


@dataclass
class ReplayResult:
    """Per queue (at batch 1, per prompt), averaged over draws at T > 0."""

    seconds: np.ndarray  # speculative decoding after the prefills
    greedy_seconds: np.ndarray  # plain decoding of the same tokens through the same rows, after the prefills
    prefill_seconds: np.ndarray  # the prompts' forward passes, which both pay
    tokens: np.ndarray  # per prompt (in queue order): tokens produced after its first one
    cycles: np.ndarray
    draft_calls: np.ndarray  # draft forwards
    decision_seconds: np.ndarray  # of ``seconds``, charged for the policy's decisions
    plain_cycles: np.ndarray
    idle_row_cycles: np.ndarray  # rows that rode along as padding, summed over cycles

    @property
    def speedup(self) -> np.ndarray:
        """End to end, prefill included on both sides, as ``bench-engine`` measures it."""
        return (self.greedy_seconds + self.prefill_seconds) / (self.seconds + self.prefill_seconds)

    @property
    def set_speedup(self) -> float:
        """Over every queue at once: total plain decoding time / total speculative time, prefill
        included (the same tokens on both sides, so the throughput ratio)."""
        return float((self.greedy_seconds + self.prefill_seconds).sum() / (self.seconds + self.prefill_seconds).sum())

    @property
    def tau(self) -> np.ndarray:
        """Tokens per cycle, per queue."""
        return self.tokens.reshape(len(self.cycles), -1).sum(1) / np.maximum(self.cycles, 1)

    def take(self, index) -> ReplayResult:
        """The queues at ``index`` (at batch 1, the prompts)."""
        return ReplayResult(**{f.name: getattr(self, f.name)[index] for f in fields(self)})


def mean_speedup(result) -> float:
    """A replay's mean speedup over its prompts."""
    return float(np.mean(result.speedup))


def positions_limit(traces: TraceSet, max_new_tokens: int | None) -> np.ndarray:
    """Roots each prompt decodes from: the recorded positions, capped at ``max_new_tokens - 1``."""
    counts = np.diff(traces.prompt_offsets)
    return counts if max_new_tokens is None else np.minimum(counts, max_new_tokens - 1)


def greedy_seconds(traces: TraceSet, cost: CostModel, limit: np.ndarray) -> np.ndarray:
    """Plain greedy decoding of each prompt alone: one target step per token, summed per prompt."""
    counts = np.diff(traces.prompt_offsets)
    prompt_of = np.repeat(np.arange(traces.n_prompts), counts)
    index_in_prompt = np.arange(traces.positions) - np.repeat(traces.prompt_offsets[:-1], counts)
    keep = index_in_prompt < limit[prompt_of]
    per_position = cost.greedy(traces.context_length[keep])
    return np.bincount(prompt_of[keep], weights=per_position, minlength=traces.n_prompts)


def decide(traces: TraceSet, policy: BatchPolicy, rows: np.ndarray, at: np.ndarray, context: np.ndarray,
           rng: np.random.Generator | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One cycle of ``rows`` (the policy's row ids) at trace positions ``at``: (depth, size, accepted),
    asked of ``policy`` as the engine asks it, which then observes the outcome."""
    levels = traces.depth_max - 1
    planned, size = policy.plan_batch(rows, context)
    planned = np.minimum(np.maximum(planned, 1), traces.depth_max)  # np.clip's overhead, per cycle
    if policy.shape is not None:  # one fixed tree: its acceptance walks the greedy path's child ranks
        depth = np.minimum(planned, policy.shape.depth)
        size, accepted = policy.shape.nodes_within(depth), policy.shape.accepted(traces.child_ranks(at), depth)
        policy.observe_batch(rows, depth, size, accepted)
        return depth, size, accepted
    depth = planned
    if overrides(policy, "keep_drafting_batch"):
        depth = drafted_depths(policy, rows, planned,
                               lambda idx, d: traces.level_scores[at[idx], d - 2].astype(np.float32))
    if overrides(policy, "choose_size_batch"):
        scores = traces.level_scores[at].astype(np.float32)
        scores[np.arange(levels)[None, :] >= (depth - 1)[:, None]] = -np.inf  # levels not drafted
        size = policy.choose_size_batch(rows, depth, scores, size)
    # at most the whole tree; at T > 0 at most the nodes the traces hold probabilities for
    size = np.minimum(np.maximum(size, 1), np.minimum(tree_capacities(depth, traces.width), traces.nodes))
    size, accepted = traces.verify(at, depth, size, rng, policy.children_batch(rows))  # top-k: fewer nodes
    if policy.reads_cache:
        policy.observe_batch(rows, depth, size, accepted, hits=traces.cache_hits(at, accepted))
    else:
        policy.observe_batch(rows, depth, size, accepted)
    return depth, size, accepted


def cycle_costs(cost: CostModel, width: int, depth: np.ndarray, size: np.ndarray, first: np.ndarray,
                context: np.ndarray, fed: np.ndarray, shape: TreeShape | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(draft, verify, bookkeeping) seconds of one cycle of each queue: ``depth`` and ``size`` per
    busy row, a queue's rows contiguous from ``first``; ``context`` (longest) and ``fed`` (the most
    tokens the first draft level feeds) per queue; a fixed ``shape`` feeds its expanded nodes."""
    deepest, largest = _per_queue(np.maximum, depth, first), _per_queue(np.maximum, size, first)
    c_max = int(context.max())
    verify = cost.table("verify", int(largest.max()), c_max)[largest, context]
    book = cost.table("bookkeeping", int(largest.max()), int(deepest.max()))
    draft = np.zeros(len(first))
    for level in range(2, int(deepest.max()) + 1):  # the rows drafting this deep, per queue
        rows = _per_queue(np.add, (depth >= level).astype(np.int64), first)
        on = rows > 0
        nodes = fed[on] if level == 2 else np.full(on.sum(), width if shape is None else int(shape.fed[level - 3]))
        draft[on] += cost.draft_rows(rows[on], nodes, context[on])
    return draft, verify, np.zeros(len(first)) if book is None else book[largest, deepest]


def _per_queue(ufunc: np.ufunc, values: np.ndarray, first: np.ndarray) -> np.ndarray:
    """``ufunc`` reduced over each queue's rows (at batch 1 a queue is its one row: the values)."""
    return values if len(first) == len(values) else ufunc.reduceat(values, first)


SAMPLED_DRAWS = 8  # at T > 0, replays averaged per queue unless a caller asks otherwise


def replay(traces: TraceSet, cost: CostModel, policy: BatchPolicy, max_new_tokens: int | None = None,
           decision_seconds: float | DecisionCharge = 0.0, seed: int = 0, prompts: np.ndarray | None = None,
           draws: int | None = None, batch: int = 1) -> ReplayResult:
    """Decode trace prompts with ``policy`` and plainly through ``batch`` rows; ``cost``: the batch-1
    model. ``prompts`` (repeats allowed): 1-D one queue at batch B, a queue per prompt at batch 1;
    2-D a queue per row. ``decision_seconds``: charged per cycle. At T > 0, ``seed`` seeds
    acceptance and each queue is decoded ``draws`` times, its times and counts averaged."""
    if policy.shape is None and policy.width != traces.width:
        raise SimspecError(f"policy {policy.name} drafts at width {policy.width}, but the traces were recorded "
                           f"at width {traces.width}: record traces at that width or change the policy")
    chosen = np.arange(traces.n_prompts) if prompts is None else np.asarray(prompts)
    queues = chosen[:, None] if chosen.ndim == 1 and batch == 1 else np.atleast_2d(chosen)
    draws = draws or (SAMPLED_DRAWS if traces.sampled else 1)
    rng = np.random.default_rng(seed) if traces.sampled else None
    every = _replay_queues(traces, cost.at_batch(batch), policy, batch, max_new_tokens, as_charge(decision_seconds),
                           np.tile(queues, (draws, 1)), rng)
    if draws == 1:
        return every
    return ReplayResult(**{f.name: getattr(every, f.name).reshape(draws, -1).mean(0) for f in fields(every)})


class Cycles:
    """The cycles of request slots (trace prompt indices) decided by ``policy``: ``step`` and
    ``plain_step`` are ``run_queues``' steps once a cost model is bound; tokens, draft calls and
    decision seconds add up as they run."""

    def __init__(self, traces: TraceSet, policy: BatchPolicy | None, charge: DecisionCharge, slots: np.ndarray,
                 limit: np.ndarray, per_queue: int, rng: np.random.Generator | None) -> None:
        self.traces, self.policy, self.charge, self.rng = traces, policy, charge, rng
        self.limit, self.per_queue = limit, per_queue
        self.start = traces.prompt_offsets[:-1][slots]
        # tokens each slot committed since it last drafted: its next draft's first level feeds them
        self.unfed, self.tokens = np.ones(len(slots), dtype=np.int64), np.zeros(len(slots), dtype=np.int64)
        n_queues = len(slots) // per_queue
        self.calls, self.decided = np.zeros(n_queues), np.zeros(n_queues)
        if policy is not None:  # a sequence's random stream: its place in its queue, as in the engine's call
            policy.row_streams = np.arange(len(slots)) % per_queue
            policy.reset_batch(len(slots))

    def step(self, cost: CostModel, busy: np.ndarray, position: np.ndarray, first: np.ndarray,
             _waiting: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        traces, policy = self.traces, self.policy
        at = self.start[busy] + position
        context = traces.context_length[at]
        depth, size, accepted = decide(traces, policy, busy, at, context, self.rng)
        drafting = depth > 1
        longest = _per_queue(np.maximum, context, first)
        fed = _per_queue(np.maximum, np.where(drafting, self.unfed[busy], 0), first)
        spent = sum(cycle_costs(cost, traces.width, depth, size, first, longest, fed, policy.shape))
        deepest, stepped = _per_queue(np.maximum, depth, first), busy[first] // self.per_queue
        # a queue none of whose rows drafts runs a plain step (the engine's, as a server that
        # switches speculation off): no tree to verify or keep
        spent = np.where(deepest == 1, cost.greedy_steps(longest), spent)
        charged = self.charge(deepest)  # the rows decide in one call: priced at the deepest tree
        self.decided[stepped] += charged
        self.calls[stepped] += deepest - 1
        self.tokens[busy] += np.minimum(accepted + 1, self.limit[busy] - position)  # the engine truncates at the budget
        self.unfed[busy] = np.where(drafting, 0, self.unfed[busy]) + accepted + 1
        return spent + charged, accepted + 1

    def plain_step(self, cost: CostModel, busy: np.ndarray, position: np.ndarray, first: np.ndarray,
                   _waiting: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        longest = _per_queue(np.maximum, self.traces.context_length[self.start[busy] + position], first)
        return cost.greedy_steps(longest), np.ones(len(busy), dtype=np.int64)


def _replay_queues(traces: TraceSet, cost: CostModel, policy: BatchPolicy, batch: int, max_new_tokens: int | None,
                   charge: DecisionCharge, queues: np.ndarray, rng: np.random.Generator | None) -> ReplayResult:
    """One replay of ``queues`` (``replay``) at ``cost``, the profile's model at ``batch``."""
    slots = queues.ravel()
    per_queue, n_queues = queues.shape[1], queues.shape[0]
    all_limits = positions_limit(traces, max_new_tokens)
    limit = all_limits[slots]
    prefill = cost.prefill(traces.prompt_lengths[slots])
    policy.batch_size = batch
    cycles = Cycles(traces, policy, charge, slots, limit, per_queue, rng)
    run = run_queues(per_queue, batch, limit, prefill, partial(cycles.step, cost))
    if batch == 1:  # a row to itself: plain decoding is each prompt's steps, summed in one pass
        by_queue = np.repeat(np.arange(n_queues), per_queue)
        plain_seconds = np.bincount(by_queue, greedy_seconds(traces, cost, all_limits)[slots], n_queues)
        plain_cycles = np.bincount(by_queue, limit, n_queues)
    else:
        plain_run = run_queues(per_queue, batch, limit, prefill, partial(cycles.plain_step, cost))
        plain_seconds, plain_cycles = plain_run.seconds, plain_run.cycles
    return ReplayResult(run.seconds, plain_seconds, run.prefill_seconds, cycles.tokens, run.cycles, cycles.calls,
                        cycles.decided, plain_cycles, run.idle_row_cycles)
