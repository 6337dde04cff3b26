"""The hindsight oracle: the least time any per-cycle (D, V) choice could take on these trees.

Dynamic programming over positions, backwards: from root position p, with c tokens committed
by the previous cycle (they ride along in the first draft call, so they change its cost),
``best[p, c] = min over (D, V) of cycle(D, V, L_p, c) + best[p + a + 1, a + 1]`` where
a = accepted(D, V) is read off the trace. Positions past the token budget cost nothing.
Vectorised over prompts and options; the loop runs over positions only. No policy that picks
(D, V) per cycle at this width can beat it on these traces and curves: every report shows
methods as a share of it.
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

    @property
    def speedup(self) -> np.ndarray:
        return (self.greedy_seconds + self.prefill_seconds) / (self.seconds + self.prefill_seconds)


def oracle(traces: TraceSet, cost: CostModel, max_new_tokens: int | None = None,
           sizes: tuple[int, ...] = ORACLE_SIZES) -> OracleResult:
    width, dmax = traces.width, traces.depth_max
    # Sizes past a tree's node count verify the whole tree: that choice is searched too.
    options = np.array(sorted({(d, int(min(v, tree_capacities(d, width)))) for d in range(1, dmax + 1)
                               for v in sizes}))
    depth, size = options[:, 0], options[:, 1]
    limit = positions_limit(traces, max_new_tokens)
    n, horizon = traces.n_prompts, int(limit.max(initial=0))
    committed = np.arange(1, dmax + 1)  # tokens the previous cycle committed: 1..D_max
    # best[i, p, c-1]; rows past a prompt's budget stay 0 (decoding is over).
    best = np.zeros((n, horizon + dmax + 1, dmax))
    start = traces.prompt_offsets[:-1]
    for p in range(horizon - 1, -1, -1):
        live = np.flatnonzero(limit > p)
        at = start[live] + p
        context = traces.context_length[at]
        accepted = accepted_at(traces.path_rank, np.repeat(at, len(options)), np.tile(depth, len(live)),
                               np.tile(size, len(live))).reshape(len(live), -1)
        cycle = cost.cycle(depth[None, :, None], width, size[None, :, None], context[:, None, None],
                           committed[None, None, :])  # [live, K, C]
        following = best[live[:, None], p + accepted + 1, accepted]  # [live, K]: next state's value
        best[live, p] = np.min(cycle + following[:, :, None], axis=1)
    prefill = cost.prefill(traces.prompt_lengths)
    return OracleResult(best[:, 0, 0], greedy_seconds(traces, cost, limit), prefill, options)
