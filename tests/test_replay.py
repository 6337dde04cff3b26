"""Vectorised replay against a plain per-prompt loop over the same traces and costs."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from simspec.errors import SimspecError
from simspec.policies import StaticPolicy, tree_capacity
from simspec.sim.traces import PromptTrace, assemble
from simspec.sim.costmodel import CostModel, Point
from simspec.sim.replay import replay
from simspec.sim.traces import NO_NODE, accepted_lengths

DEPTH_MAX = 6


def random_traces(seed: int, n_prompts: int = 7):
    rng = np.random.default_rng(seed)
    levels = DEPTH_MAX - 1
    traces = []
    for _ in range(n_prompts):
        n = int(rng.integers(3, 40))
        ranks = np.full((n, levels, levels), NO_NODE, dtype=np.int16)
        for p in range(n):
            reach = int(rng.integers(0, levels + 1))  # the greedy path's depth in the full tree
            for j in range(1, reach + 1):
                for d in range(j + 1, DEPTH_MAX + 1):
                    ranks[p, j - 1, d - 2] = rng.integers(0, 4) * j + (d - j)  # grows with depth
        traces.append(PromptTrace(np.zeros(n + 6, dtype=np.int64), 50 + np.arange(n, dtype=np.int32), ranks,
                                  np.zeros((n, levels, 4), np.float16), np.zeros((n, levels, 2), np.float16), False))
    return assemble(traces, [50] * n_prompts, {"depth_max": DEPTH_MAX, "width": 2, "prompt_ids": list("abcdefg")})


def cost_model():
    points = ([Point("verify", n, c, 0.05 + 2e-3 * n + 1e-5 * c) for c in (32, 512) for n in (1, 8, 64)]
              + [Point("draft", n, c, 0.004 + 3e-4 * n) for c in (32, 512) for n in (1, 4, 16)]
              + [Point("greedy", 1, c, 0.05 + 1e-5 * c) for c in (32, 512)]
              + [Point("prefill", n, 0, 0.01 * n) for n in (16, 128)])
    return CostModel(points)


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
