"""Replay at batch size B: the traces' prompts as one queue through B rows, by the rules of the
real engine (``simspec.engine.speculative``), so that its cycles are the engine's cycles.

- A row decodes one prompt; when it finishes, the next prompt of the queue is prefilled into it
  (alone: batch 1's prefill, before the next cycle). Once the queue is empty a free row idles
  as padding: every cycle is a batch-B forward.
- A cycle drafts as deep as its deepest row (one draft forward per level, padded over every
  row, the first one feeding each row's committed tokens, padded to the most; the draft head
  scores only the rows still drafting, so a level costs the profile's step at that many rows
  where it measured them) and verifies every row's tree in one forward padded to the largest
  V, whose attention reads the longest context. Its time is the profile's curves at batch B
  (``CostModel.at_batch``) at those maxima, plus one policy decision (the engine asks the
  policy once per cycle for every busy row, vectorised).
- Plain decoding runs the same queue one token per row per cycle.
- On traces recorded at T > 0 each row's acceptance is drawn from its tree's accepted-length
  law (``TraceSet.accepted``), as batch-1 replay draws it, and the queue is replayed several
  times, averaged: the tokens are the recorded continuation's, only acceptance is drawn.

Speedup at batch B is plain decoding's time for the whole queue over the method's: the same
tokens, so the throughput ratio a server sees."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simspec.errors import SimspecError
from simspec.policies.base import BatchPolicy
from simspec.policies.shape import TreeShape
from simspec.sim.charge import DecisionCharge, as_charge
from simspec.sim.costmodel import CostModel
from simspec.sim.replay import SAMPLED_DRAWS, decide, positions_limit
from simspec.sim.traces import TraceSet


@dataclass(frozen=True)
class BatchReplay:
    """One method's queue at batch B, and plain decoding's."""

    seconds: float  # the whole queue, prefills included
    plain_seconds: float
    tokens: np.ndarray  # [prompts] tokens produced after the prefill's first one
    cycles: int  # batch cycles
    plain_cycles: int
    idle_row_cycles: int  # rows that rode along as padding, summed over cycles
    draft_calls: int
    decision_seconds: float = 0.0  # of ``seconds``, charged for the policy's decisions

    @property
    def speedup(self) -> float:
        return self.plain_seconds / self.seconds


def _queue(n: int, batch: int, limit: np.ndarray, prefill: np.ndarray, step) -> tuple[float, int, int]:
    """Run the queue: ``step(busy prompt ids)`` runs one cycle of them and returns its seconds and
    how far each advanced. Returns (seconds, cycles, idle row-cycles)."""
    position = np.zeros(n, dtype=np.int64)
    rows = np.full(batch, -1)
    waiting = iter(range(n))
    seconds = 0.0
    cycles = idle = 0

    def admit(slot: int) -> float:
        p = next(waiting, -1)
        rows[slot] = p
        return 0.0 if p < 0 else float(prefill[p])

    for slot in range(batch):
        seconds += admit(slot)
    while (rows >= 0).any():
        busy = np.sort(rows[rows >= 0])  # in the queue's order, as the engine asks its policy
        cycle_s, advanced = step(busy, position[busy])
        seconds += cycle_s
        position[busy] += advanced
        cycles += 1
        idle += batch - len(busy)
        for slot in np.flatnonzero(rows >= 0):
            if position[rows[slot]] >= limit[rows[slot]]:
                seconds += admit(slot)
    return seconds, cycles, idle


def cycle_costs(at_batch: CostModel, width: int, depth: np.ndarray, size: np.ndarray, context: int,
                fed: int, shape: TreeShape | None = None) -> tuple[float, float, float]:
    """(draft, verify, bookkeeping) seconds of one batched cycle whose busy rows drafted ``depth``
    levels and verify ``size`` tokens, the longest row at ``context``, the first draft level
    feeding ``fed`` nodes (the most tokens a row committed last cycle), at ``at_batch``'s curves
    (module docstring: the largest tree sets the verify width, the deepest row the levels). A tree
    of fixed ``shape`` feeds that level's expanded nodes instead of ``width``."""
    deepest, longest_tree = int(depth.max()), int(size.max())
    book = at_batch.table("bookkeeping", longest_tree, deepest)
    verify = float(at_batch.table("verify", longest_tree, context)[longest_tree, context])
    # Level k's draft step (the root's feeds the committed tokens) runs for the rows drafting
    # that deep: a row that stopped early leaves a cheaper step to the others.
    def nodes(level: int) -> int:
        return fed if level == 2 else width if shape is None else int(shape.fed[level - 3])

    draft = sum(at_batch.draft_rows(int((depth >= level).sum()), nodes(level), context)
                for level in range(2, deepest + 1))
    return float(draft), verify, 0.0 if book is None else float(book[longest_tree, deepest])


def replay_batch(traces: TraceSet, cost: CostModel, policy: BatchPolicy, batch: int,
                 max_new_tokens: int | None = None, decision_seconds: float | DecisionCharge = 0.0,
                 prompts: np.ndarray | None = None, seed: int = 0, draws: int | None = None) -> BatchReplay:
    """Decode ``prompts`` (default: every trace prompt, in order) as one queue through ``batch``
    rows with ``policy``, and plainly; ``cost`` is the profile's batch-1 model (its curves at
    ``batch`` price the cycles). On traces recorded at T > 0 each cycle's acceptance is drawn
    (``seed``) and the queue replayed ``draws`` times (default ``SAMPLED_DRAWS``), averaged."""
    if policy.shape is None and policy.width != traces.width:
        raise SimspecError(f"policy {policy.name} drafts at width {policy.width}, but the traces were recorded "
                           f"at width {traces.width}: record traces at that width or change the policy")
    draws = draws or (SAMPLED_DRAWS if traces.sampled else 1)
    prompts = np.arange(traces.n_prompts) if prompts is None else np.asarray(prompts)
    runs = [_replay_queue(traces, cost, policy, batch, max_new_tokens, as_charge(decision_seconds), prompts,
                          np.random.default_rng([seed, d]) if traces.sampled else None) for d in range(draws)]
    return mean_replay(runs)


def mean_replay(runs: list[BatchReplay]) -> BatchReplay:
    """The field-by-field mean of replays of one queue (draws) or of like queues (sampled passes)."""
    if len(runs) == 1:
        return runs[0]
    mean = {name: np.mean([getattr(r, name) for r in runs], axis=0) for name in BatchReplay.__dataclass_fields__}
    return BatchReplay(**mean)


def _replay_queue(traces: TraceSet, cost: CostModel, policy: BatchPolicy, batch: int, max_new_tokens: int | None,
                  charge: DecisionCharge, prompts: np.ndarray, rng: np.random.Generator | None) -> BatchReplay:
    """One replay of the queue (``replay_batch``); ``rng`` draws acceptance on sampled traces."""
    at_batch = cost.at_batch(batch)
    n = len(prompts)
    limit = positions_limit(traces, max_new_tokens)[prompts]
    start = traces.prompt_offsets[:-1][prompts]
    prefill = cost.prefill(traces.prompt_lengths[prompts])
    width = traces.width
    previous = np.zeros(n, dtype=np.int64)
    tokens = np.zeros(n, dtype=np.int64)
    calls, decisions = [0], [0.0]
    policy.batch_size = batch
    policy.reset_batch(n)

    def speculative(busy: np.ndarray, position: np.ndarray) -> tuple[float, np.ndarray]:
        at = start[busy] + position
        context = traces.context_length[at]
        depth, size, accepted = decide(traces, policy, busy, at, context, rng)
        decided = float(charge(depth.max()))  # the rows decide in one call: priced at the deepest tree
        decisions[0] += decided
        seconds = sum(cycle_costs(at_batch, width, depth, size, int(context.max()), int(previous[busy].max()) + 1,
                                  policy.shape)) + decided
        tokens[busy] += np.minimum(accepted + 1, limit[busy] - position)
        previous[busy] = accepted
        calls[0] += int(depth.max()) - 1
        return seconds, accepted + 1

    def plain(busy: np.ndarray, position: np.ndarray) -> tuple[float, np.ndarray]:
        context = traces.context_length[start[busy] + position]
        return float(at_batch.greedy(int(context.max()))), np.ones(len(busy), dtype=np.int64)

    seconds, cycles, idle = _queue(n, batch, limit, prefill, speculative)
    plain_seconds, plain_cycles, _ = _queue(n, batch, limit, prefill, plain)
    return BatchReplay(seconds, plain_seconds, tokens, cycles, plain_cycles, idle, calls[0], decisions[0])
