"""Vectorised replay against a plain per-prompt loop over the same traces and costs."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from helpers import DEPTH_MAX, cost_model, random_traces

from simspec.errors import SimspecError
from simspec.policies import StaticPolicy, tree_capacity
from simspec.sim.replay import replay
from simspec.sim.traces import accepted_lengths


def loop_reference(traces, cost, depth, size, max_new):
    speedups = []
    for i in range(traces.n_prompts):
        rows = traces.prompt_positions(i)
        ranks, context = traces.path_rank[rows], traces.context_length[rows]
        limit = min(len(ranks), max_new - 1)
        p, previous, spec, greedy = 0, 0, 0.0, 0.0
        verified = min(size, tree_capacity(depth, traces.width))
        while p < limit:
            a = int(accepted_lengths(ranks[p:p + 1], depth, size)[0])
            spec += float(cost.cycle(depth, traces.width, verified, context[p], previous + 1))
            previous, p = a, p + a + 1
        greedy = float(sum(cost.greedy(context[q]) for q in range(limit)))
        prefill = float(cost.prefill(traces.prompt_lengths[i]))
        speedups.append((greedy + prefill) / (spec + prefill))
    return np.array(speedups)


@pytest.mark.parametrize("depth,size", [(1, 1), (2, 2), (4, 6), (6, 40)])
@pytest.mark.parametrize("max_new", [5, 200])
def test_replay_equals_a_plain_loop(depth, size, max_new):
    traces, cost = random_traces(depth * 31 + size), cost_model()
    result = replay(traces, cost, StaticPolicy(depth, traces.width, size), max_new_tokens=max_new)
    np.testing.assert_allclose(result.speedup, loop_reference(traces, cost, depth, size, max_new), rtol=1e-9)
    limit = np.minimum(np.diff(traces.prompt_offsets), max_new - 1)
    assert np.array_equal(result.tokens, limit)  # every position decoded exactly once
    if depth == 1:
        assert np.all(result.cycles == limit)


def test_replay_refuses_another_width():
    with pytest.raises(SimspecError, match="recorded at width 2"):
        replay(random_traces(0), cost_model(), StaticPolicy(3, 10, 4))


def brute_force_least_time(traces, cost, i, max_new, options):
    """The least time over every sequence of per-cycle choices, by memoised recursion."""
    rows = traces.prompt_positions(i)
    ranks, context = traces.path_rank[rows], traces.context_length[rows]
    limit = min(len(ranks), max_new - 1)

    @functools.cache
    def least(p, committed):
        if p >= limit:
            return 0.0
        return min(float(cost.cycle(d, traces.width, v, context[p], committed))
                   + least(p + a + 1, a + 1)
                   for d, v in options
                   for a in [int(accepted_lengths(ranks[p:p + 1], d, v)[0])])

    return least(0, 1)


def test_oracle_is_the_exact_least_time_and_bounds_every_policy():
    from simspec.sim.oracle import oracle

    traces, cost = random_traces(5), cost_model()
    sizes = (1, 2, 4, 8, 19)
    result = oracle(traces, cost, max_new_tokens=9, sizes=sizes)
    for i in range(traces.n_prompts):
        expected = brute_force_least_time(traces, cost, i, 9, [tuple(o) for o in result.options])
        assert result.seconds[i] == pytest.approx(expected, rel=1e-9)
    for depth in range(1, DEPTH_MAX + 1):
        for size in sizes:
            static = replay(traces, cost, StaticPolicy(depth, traces.width, size), max_new_tokens=9)
            assert np.all(static.seconds >= result.seconds - 1e-12)
