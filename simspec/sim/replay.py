"""Replay of speculative decoding on recorded traces (numpy only): exact for greedy traces,
Monte Carlo at T > 0.

All prompts advance together, one cycle per loop iteration: each row's accepted length comes
from its trace at its current position (greedy: read off the greedy path; T > 0: drawn from the
tree's accepted-length distribution with a seeded generator), its time from the cost model,
and its position moves by accepted + 1, as the engine's does. At T > 0 the next tree is the one
recorded at that position of the sampled continuation: acceptance is drawn from the right law,
the tokens themselves are not re-sampled. The Python loop runs over cycles (at most the number
of new tokens), never over prompts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simspec.errors import SimspecError
from simspec.policies.base import BatchPolicy, drafted_depths, overrides, tree_capacities
from simspec.sim.charge import DecisionCharge, as_charge
from simspec.sim.costmodel import CostModel
from simspec.sim.traces import TraceSet


@dataclass
class ReplayResult:
    seconds: np.ndarray  # [prompts] speculative decoding time after the prefill
    greedy_seconds: np.ndarray  # [prompts] plain greedy decoding of the same tokens after the prefill
    prefill_seconds: np.ndarray  # [prompts] the prompt's forward pass, which both pay
    tokens: np.ndarray  # [prompts] tokens produced after the first one
    cycles: np.ndarray  # [prompts]
    draft_calls: np.ndarray  # [prompts]
    decision_seconds: np.ndarray | None = None  # [prompts] of ``seconds``, charged for the policy's decisions

    @property
    def speedup(self) -> np.ndarray:
        """End to end, prefill included on both sides, as ``bench-engine`` measures it."""
        return (self.greedy_seconds + self.prefill_seconds) / (self.seconds + self.prefill_seconds)

    @property
    def set_speedup(self) -> float:
        """Over every prompt at once: total plain decoding time / total speculative time, prefill
        included (the same tokens on both sides, so the throughput ratio)."""
        return float((self.greedy_seconds + self.prefill_seconds).sum() / (self.seconds + self.prefill_seconds).sum())

    @property
    def tau(self) -> np.ndarray:
        return self.tokens / np.maximum(self.cycles, 1)


def positions_limit(traces: TraceSet, max_new_tokens: int | None) -> np.ndarray:
    """Roots each prompt decodes from: the recorded positions, capped at ``max_new_tokens - 1``."""
    counts = np.diff(traces.prompt_offsets)
    return counts if max_new_tokens is None else np.minimum(counts, max_new_tokens - 1)


def greedy_seconds(traces: TraceSet, cost: CostModel, limit: np.ndarray) -> np.ndarray:
    """Plain greedy decoding of the same positions: one target step per token, summed per
    prompt in one pass over all positions."""
    counts = np.diff(traces.prompt_offsets)
    prompt_of = np.repeat(np.arange(traces.n_prompts), counts)
    index_in_prompt = np.arange(traces.positions) - np.repeat(traces.prompt_offsets[:-1], counts)
    keep = index_in_prompt < limit[prompt_of]
    per_position = cost.greedy(traces.context_length[keep])
    return np.bincount(prompt_of[keep], weights=per_position, minlength=traces.n_prompts)


def decide(traces: TraceSet, policy: BatchPolicy, rows: np.ndarray, at: np.ndarray, context: np.ndarray,
           rng: np.random.Generator | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One cycle of ``rows`` (the policy's row ids) rooted at trace positions ``at``: the depth
    drafted, the nodes verified and the drafts accepted, asked of ``policy`` as the engine asks
    it, which then observes the outcome."""
    levels = traces.depth_max - 1
    planned, size = policy.plan_batch(rows, context)
    planned = np.clip(planned, 1, traces.depth_max)
    if policy.shape is not None:  # one fixed tree: its acceptance walks the greedy path's child ranks
        depth = np.minimum(planned, policy.shape.depth)
        size, accepted = policy.shape.nodes_within(depth), policy.shape.accepted(traces.child_ranks(at), depth)
        policy.observe_batch(rows, depth, size, accepted)
        return depth, size, accepted
    if overrides(policy, "keep_drafting_batch"):
        depth = drafted_depths(policy, rows, planned,
                               lambda idx, d: traces.level_scores[at[idx], d - 2].astype(np.float32))
    else:
        depth = planned
    if overrides(policy, "choose_size_batch"):
        scores = traces.level_scores[at].astype(np.float32)
        scores[np.arange(levels)[None, :] >= (depth - 1)[:, None]] = -np.inf  # levels not drafted
        size = policy.choose_size_batch(rows, depth, scores, size)
    # at most the whole tree; at T > 0 at most the nodes the traces hold probabilities for
    size = np.clip(size, 1, np.minimum(tree_capacities(depth, traces.width), traces.nodes))
    accepted = traces.accepted(at, depth, size, rng)
    if policy.reads_cache:
        policy.observe_batch(rows, depth, size, accepted, hits=traces.cache_hits(at, accepted))
    else:
        policy.observe_batch(rows, depth, size, accepted)
    return depth, size, accepted


SAMPLED_DRAWS = 8  # at T > 0, replays averaged per prompt unless a caller asks otherwise


def replay(traces: TraceSet, cost: CostModel, policy: BatchPolicy, max_new_tokens: int | None = None,
           decision_seconds: float | DecisionCharge = 0.0, seed: int = 0, prompts: np.ndarray | None = None,
           draws: int | None = None) -> ReplayResult:
    """Decode every trace prompt (or ``prompts``, repeats allowed) with ``policy``;
    ``decision_seconds`` is charged per cycle for its decisions (seconds, or a ``DecisionCharge``
    by the cycle's depth). On traces recorded at T > 0, ``seed`` seeds acceptance and each prompt is decoded
    ``draws`` times (default ``SAMPLED_DRAWS``), its times and counts averaged."""
    draws = draws or (SAMPLED_DRAWS if traces.sampled else 1)
    if draws > 1:
        chosen = np.arange(traces.n_prompts) if prompts is None else np.asarray(prompts)
        every = replay(traces, cost, policy, max_new_tokens, decision_seconds, seed, np.tile(chosen, draws), 1)
        return ReplayResult(*(getattr(every, name).reshape(draws, -1).mean(0) for name in
                              ("seconds", "greedy_seconds", "prefill_seconds", "tokens", "cycles", "draft_calls",
                               "decision_seconds")))
    if policy.shape is None and policy.width != traces.width:
        raise SimspecError(f"policy {policy.name} drafts at width {policy.width}, but the traces were recorded "
                           f"at width {traces.width}: record traces at that width or change the policy")
    width = traces.width
    prompts = np.arange(traces.n_prompts) if prompts is None else np.asarray(prompts)
    all_limits = positions_limit(traces, max_new_tokens)
    limit = all_limits[prompts]
    start = traces.prompt_offsets[:-1][prompts]
    n = len(prompts)
    rng = np.random.default_rng(seed) if traces.sampled else None
    position = np.zeros(n, dtype=np.int64)  # root index within each prompt
    previous = np.zeros(n, dtype=np.int64)  # last cycle's accepted drafts
    seconds, decided = np.zeros(n), np.zeros(n)
    charge = as_charge(decision_seconds)
    tokens, cycles, calls = (np.zeros(n, dtype=np.int64) for _ in range(3))
    policy.batch_size = 1
    policy.reset_batch(n)
    active = position < limit
    while active.any():
        rows = np.flatnonzero(active)
        at = start[rows] + position[rows]
        context = traces.context_length[at]
        depth, size, accepted = decide(traces, policy, rows, at, context, rng)
        spent = charge(depth)
        decided[rows] += spent
        seconds[rows] += spent + (cost.cycle(depth, width, size, context, previous[rows] + 1)
                                  if policy.shape is None else
                                  cost.shaped_cycle(policy.shape, depth, context, previous[rows] + 1))
        tokens[rows] += np.minimum(accepted + 1, limit[rows] - position[rows])  # the engine truncates at the budget
        cycles[rows] += 1
        calls[rows] += np.maximum(depth - 1, 0)
        position[rows] += accepted + 1
        previous[rows] = accepted
        active = position < limit
    prefill = cost.prefill(traces.prompt_lengths[prompts])
    return ReplayResult(seconds, greedy_seconds(traces, cost, all_limits)[prompts], prefill, tokens, cycles, calls,
                        decided)


