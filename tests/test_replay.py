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
    if depth == 1:  # drafting nothing, every cycle is the engine's plain step: plain decoding's time
        assert np.all(result.cycles == limit)
        np.testing.assert_allclose(result.speedup, 1.0, rtol=1e-12)


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


# (set speedup, cycles, draft forwards) of each policy on the shipped traces, 48 new tokens, a
# decision charge by depth, seed 7: what the two replays this one replaced gave (batch 1:
# per-prompt replay; batch 4: the queue replay), to 1e-12 (2026-12-05, commit bb19dc8); Q-learning's
# since each sequence explores with its own stream, keyed by its place in its queue, as the engine
# draws it (``RowStreams``, 2026-12-06: at batch 1 every prompt, alone in its queue, meets the same draws).
PINNED = {
    ("cpu-demo", 1, "static"): (1.5893264655445807, 3037, 9111),
    ("cpu-demo", 1, "ddd"): (1.5347810788866618, 2746, 10364),
    ("cpu-demo", 1, "fsm"): (1.4654790620974767, 2980, 7685),
    ("cpu-demo", 1, "qlearn"): (1.0768819806187229, 3894, 5735),
    ("cpu-demo", 1, "sequoia"): (1.386478419422881, 3316, 9948),
    ("cpu-demo-T1", 1, "static"): (1.29907803310216, 837.625, 2512.875),
    ("cpu-demo-T1", 1, "ddd"): (1.1996809770981158, 755.125, 2708.5),
    ("cpu-demo-T1", 1, "fsm"): (1.2086200700309302, 816.125, 1872.75),
    ("cpu-demo-T1", 1, "qlearn"): (1.1013930084076256, 994.125, 1517.875),
    ("cpu-demo-batch", 4, "static"): (1.0849896676411313, 765, 2295),
    ("cpu-demo-batch", 4, "ddd"): (0.9678662607209743, 693, 3366),
    ("cpu-demo-batch", 4, "fsm"): (0.9515717340775856, 752, 2704),
    ("cpu-demo-batch", 4, "qlearn"): (0.8259388135540056, 864, 4269),
    ("cpu-demo-batch", 4, "sequoia"): (1.159453972246256, 836, 2508),
}


@pytest.mark.parametrize("name,batch", sorted({(k[0], k[1]) for k in PINNED}))
def test_the_replay_gives_the_numbers_of_the_replays_it_replaced_on_the_shipped_traces(name, batch):
    from helpers import ROOT

    from simspec.policies.baselines import DDD, FSM, QLearning
    from simspec.policies.rules.sequoia import SequoiaTree
    from simspec.policies.shape import TreeShape
    from simspec.sim.charge import DecisionCharge
    from simspec.sim.profile import load_profile

    profile = load_profile(ROOT / "calibration" / name)
    traces, w = profile.traces(), profile.traces().width
    policies = {"static": StaticPolicy(4, w, 8), "ddd": DDD(0.4, w, 8, 12), "fsm": FSM(w, 8, 12),
                "qlearn": QLearning(profile.cost, 256, 0.3, width=w, max_depth=8, size=12),
                "sequoia": SequoiaTree(TreeShape.of([[0], [1], [0, 0], [0, 1], [0, 0, 0]]))}
    for policy_name, policy in policies.items():
        if (name, batch, policy_name) not in PINNED:
            continue
        r = replay(traces, profile.cost, policy, 48, DecisionCharge((2, 6), (1e-4, 4e-4)), seed=7, batch=batch)
        assert (r.set_speedup, r.cycles.sum(), r.draft_calls.sum()) == pytest.approx(
            PINNED[name, batch, policy_name], rel=1e-12), policy_name
