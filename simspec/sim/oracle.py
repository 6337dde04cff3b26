"""The hindsight oracle: the least time any per-cycle (D, V) choice could take on these trees.

Dynamic programming over positions, backwards: from root position p, with c tokens committed
by the previous cycle (fed in the first draft call, so they change its cost),
``best[p, c] = min over (D, V) of cycle(D, V, L_p, c) + best[p + a + 1, a + 1]`` where
a = accepted(D, V) is read off the trace; positions past the budget cost nothing. The loop runs
over positions only. At T > 0 the oracle is one in expectation (it knows every tree's
accepted-length law, not the draw): ``cycle + sum_a P(a) best[p + a + 1, a + 1]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simspec.policies.base import tree_capacities
from simspec.sim.costmodel import CostModel
from simspec.sim.replay import greedy_seconds, positions_limit
from simspec.sim.traces import TraceSet, accepted_at

ORACLE_SIZES = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 60, 80, 96, 128, 160, 200, 240)


@dataclass
class OracleResult:
    seconds: np.ndarray  # [prompts] least decoding time after the prefill
    greedy_seconds: np.ndarray
    prefill_seconds: np.ndarray
    options: np.ndarray  # [K, 2] the (D, V) choices searched
    choice: np.ndarray | None = None  # [prompts, positions, committed - 1] the best option's index (on request)

    @property
    def speedup(self) -> np.ndarray:
        return (self.greedy_seconds + self.prefill_seconds) / (self.seconds + self.prefill_seconds)


def oracle(traces: TraceSet, cost: CostModel, max_new_tokens: int | None = None,
           sizes: tuple[int, ...] = ORACLE_SIZES, choices: bool = False) -> OracleResult:
    """The least time per prompt; with ``choices``, also the argmin option of every state (imitation, research)."""
    width, dmax = traces.width, traces.depth_max
    # Sizes past a tree's node count verify the whole tree: that choice is searched too.
    options = np.array(sorted({(d, int(min(v, tree_capacities(d, width), traces.nodes)))
                               for d in range(1, dmax + 1) for v in sizes}))
    depth, size = options[:, 0], options[:, 1]
    limit = positions_limit(traces, max_new_tokens)
    n, horizon = traces.n_prompts, int(limit.max(initial=0))
    committed = np.arange(1, dmax + 1)  # tokens the previous cycle committed: 1..D_max
    ones, deep = np.ones(1, dtype=np.int64), depth >= 2
    # best[i, p, c-1]; rows past a prompt's budget stay 0 (decoding is over).
    best = np.zeros((n, horizon + dmax + 1, dmax))
    choice = np.zeros((n, horizon, dmax), dtype=np.int16) if choices else None
    start = traces.prompt_offsets[:-1]
    for p in range(horizon - 1, -1, -1):
        live = np.flatnonzero(limit > p)
        at = start[live] + p
        context = traces.context_length[at]
        rows, d_rows, v_rows = np.repeat(at, len(options)), np.tile(depth, len(live)), np.tile(size, len(live))
        # A cycle's cost depends on the tokens committed before it only through its first draft call
        # (trees of two or more levels): the least over options is taken per kind, then per committed.
        rest = cost.cycle(depth[None, :], width, size[None, :], context[:, None], 1)  # [live, K]
        if traces.sampled:  # the next state's expected value over the accepted-length distribution
            chance = traces.accepted_distribution(rows, d_rows, v_rows).reshape(len(live), len(options), dmax)
            a = np.arange(dmax)
            following = np.einsum("lka,la->lk", chance, best[live[:, None], p + a[None, :] + 1, a[None, :]])
        else:
            accepted = accepted_at(traces.path_rank, rows, d_rows, v_rows).reshape(len(live), -1)
            following = best[live[:, None], p + accepted + 1, accepted]  # [live, K]: next state's value
        value = rest + following
        # drafted trees without the first draft call they were priced with (fed one token)
        drafted = value[:, deep] - cost.fed_draft(ones, context)[:, None]
        plain, lead = value[:, ~deep].min(1), drafted.argmin(1)
        fed = cost.fed_draft(committed[None, :], context[:, None])  # [live, C]
        best[live, p] = np.minimum(plain[:, None], drafted[np.arange(len(live)), lead][:, None] + fed)
        if choice is not None:  # the first option reaching the least, as an argmin over all of them would
            choice[live, p] = np.where(plain[:, None] <= best[live, p],
                                       np.flatnonzero(~deep)[value[:, ~deep].argmin(1)][:, None],
                                       np.flatnonzero(deep)[lead][:, None])
    prefill = cost.prefill(traces.prompt_lengths)
    return OracleResult(best[:, 0, 0], greedy_seconds(traces, cost, limit), prefill, options, choice)
