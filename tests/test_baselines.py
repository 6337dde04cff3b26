"""Each baseline rule of simspec.policies.baselines does what its docstring says, on crafted
inputs where the right decision is known; grid search returns the best cell of its surface.
numpy only."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import cost_model, random_traces

from simspec.policies.base import StaticPolicy, drafted_depths, frontier_scores
from simspec.policies.baselines import DDD, FSM, SVIP, AnalyticWindow, GammaTune, QLearning
from simspec.sim.evaluate import GRID_SIZES, grid_best
from simspec.sim.replay import replay

W = 2  # beam width of the crafted frontiers: W**2 = 4 candidates per level


def frontier(*probabilities: float) -> np.ndarray:
    """One row of newest-level cumulative log-probs, best first, -inf padded to W**2."""
    row = np.full(W * W, -np.inf, dtype=np.float32)
    row[: len(probabilities)] = np.log(sorted(probabilities, reverse=True))
    return row


def keep(policy, frontiers: list[np.ndarray], depth: int = 3, planned: int = 8) -> list[bool]:
    rows = np.arange(len(frontiers))
    go = policy.keep_drafting_batch(rows, np.full(len(rows), depth), np.stack(frontiers), np.full(len(rows), planned))
    return [bool(g) for g in go]


def one_cycle(policy, depth: int, accepted: int) -> None:
    policy.observe_batch(np.zeros(1, dtype=np.int64), np.array([depth]), np.array([60]), np.array([accepted]))


def planned_depth(policy) -> int:
    return int(policy.plan_batch(np.zeros(1, dtype=np.int64), np.array([256]))[0][0])


# --- DDD: continue while the beam holds at least `threshold` of the probability mass ------------

def test_ddd_stops_when_the_beams_mass_falls_under_its_threshold():
    ddd = DDD(0.3, width=W, max_depth=8, size=16)
    above, below = frontier(0.2, 0.1, 0.05), frontier(0.2, 0.05, 0.03)  # mass 0.35 and 0.28
    assert keep(ddd, [above, below]) == [True, False]
    assert keep(ddd, [frontier(0.31)]) == [True]  # one candidate alone may hold the mass
    assert keep(ddd, [above], depth=8, planned=8) == [False]  # the planned depth is a hard stop
    # As the engine asks it (a row's raw scores laid out by frontier_scores, float16 as traces
    # store them), it decides alike.
    ddd.reset_batch(1)
    for probabilities, expected in [((0.2, 0.1, 0.05), True), ((0.2, 0.05, 0.03), False)]:
        table = frontier_scores(np.log(np.array(probabilities, dtype=np.float32)), W)[None]
        go = ddd.keep_drafting_batch(np.zeros(1, dtype=np.int64), np.array([3]), table, np.array([8]))
        assert bool(go[0]) is expected


def test_ddd_drafts_to_the_depth_where_the_mass_drops():
    """Through the simulator's driver: the beam holds 0.9, 0.6, 0.4, 0.2, ... of the mass at
    depths 2, 3, 4, 5: threshold 0.3 drafts to depth 5 (the level that fell under it is the last)."""
    mass = {2: 0.9, 3: 0.6, 4: 0.4, 5: 0.2, 6: 0.1, 7: 0.05}
    frontier_of = lambda idx, depth: np.stack([frontier(mass[int(d)]) for d in depth])  # noqa: E731
    rows = np.zeros(1, dtype=np.int64)
    for threshold, expected in [(0.3, 5), (0.5, 4), (0.95, 2), (0.01, 8)]:
        depth = drafted_depths(DDD(threshold, W, 8, 16), rows, np.array([8]), frontier_of)
        assert int(depth[0]) == expected, threshold


# --- SVIP: continue while the renormalised beam's entropy stays under max_entropy --------------

def test_svip_stops_on_high_entropy_and_goes_on_when_confident():
    svip = SVIP(1.0, width=W, max_depth=8, size=16)
    uniform4 = frontier(0.1, 0.1, 0.1, 0.1)  # renormalised: entropy ln 4 = 1.39 nats
    peaked = frontier(0.97, 0.01, 0.01, 0.01)  # 0.17 nats
    two = frontier(0.3, 0.3)  # ln 2 = 0.69 nats: padding slots add nothing
    faint_but_sure = frontier(0.0097, 0.0001, 0.0001, 0.0001)  # tiny mass, same shape as `peaked`
    assert keep(svip, [uniform4, peaked, two, faint_but_sure]) == [False, True, True, True]
    assert keep(SVIP(0.6, W, 8, 16), [two]) == [False]  # ln 2 > 0.6
    assert keep(svip, [peaked], depth=8, planned=8) == [False]


# --- GammaTune: depth = round(EMA of accepted lengths) + 2, clipped to [2, max_depth] -----------

def test_gammatune_window_follows_the_acceptance_rate():
    tune = GammaTune(alpha=0.25, width=W, max_depth=8, size=16, start_depth=4)
    tune.reset_batch(1)
    depths = [planned_depth(tune)]
    # EMA of accepted lengths from start_depth - 2 = 2: 3.0, 3.75, 2.81, 2.11, 1.58, 1.19.
    for accepted in (6, 6, 0, 0, 0, 0):
        one_cycle(tune, depths[-1], accepted)
        depths.append(planned_depth(tune))
    assert depths == [4, 5, 6, 5, 4, 4, 3]  # deeper while acceptance is high, shallower after
    for _ in range(20):
        one_cycle(tune, 8, 7)
    assert planned_depth(tune) == 8  # capped at max_depth
    for _ in range(20):
        one_cycle(tune, 2, 0)
    assert planned_depth(tune) == 2  # never below one draft step


def test_gammatune_rows_are_independent():
    tune = GammaTune(alpha=0.5, width=W, max_depth=8, size=16, start_depth=4)
    tune.reset_batch(2)
    rows = np.arange(2)
    tune.observe_batch(rows, np.array([4, 4]), np.array([16, 16]), np.array([6, 0]))  # EMA 4 and 1
    assert tune.plan_batch(rows, np.array([256, 256]))[0].tolist() == [6, 3]


# --- AnalyticWindow: the γ maximising (1 - β^(γ+1)) / ((1 - β)(γ a + b(γ))) ----------------------

def brute_force_depth(cost, beta: float, width: int, max_depth: int, size: int, context: int) -> int:
    beta = min(max(beta, 1e-3), 0.98)
    a = float(cost.draft(width, context))  # one draft step of the beam
    best, best_rate = None, -np.inf
    for gamma in range(1, max_depth):
        nodes = 1 + width + (gamma - 1) * width * width  # a (γ + 1)-level tree
        b = float(cost.verify(min(size, nodes), context))
        rate = (1 - beta ** (gamma + 1)) / ((1 - beta) * (gamma * a + b))
        if rate > best_rate:
            best, best_rate = gamma, rate
    return best + 1


def test_analytic_window_picks_the_gamma_its_formula_maximises():
    cost = cost_model()
    window = AnalyticWindow(cost, context=256, history=2, width=W, max_depth=8, size=60)
    window.reset_batch(1)
    chosen = {}
    assert planned_depth(window) == brute_force_depth(cost, 0.6, W, 8, 60, 256)  # no history: β = 0.6
    # β = accepted / trials over the last `history` cycles; a cycle's trials are the drafted levels
    # up to the first rejection: min(accepted + 1, depth - 1).
    for cycles, beta in [([(6, 5), (6, 5)], 0.98),  # everything accepted: β = 1, capped at 0.98
                         ([(6, 4), (6, 4)], 0.8),  # 4 of 5 trials each
                         ([(6, 5), (6, 0), (6, 3)], 0.6),  # history 2: only (0 of 1) and (3 of 4)
                         ([(6, 1), (6, 1)], 0.5),  # 1 of 2 trials each
                         ([(6, 0), (6, 0)], 0.0)]:  # rejected at once: β floored at 1e-3
        for depth, accepted in cycles:
            one_cycle(window, depth, accepted)
        chosen[beta] = planned_depth(window)
        assert chosen[beta] == brute_force_depth(cost, beta, W, 8, 60, 256), beta
    assert chosen[0.98] > chosen[0.8] > chosen[0.6] > chosen[0.0] == 2  # the cases do tell β apart


# --- FSM: one deeper after a fully accepted cycle, one shallower otherwise, after `patience` ----

def test_fsm_moves_one_step_per_cycle_and_saturates():
    fsm = FSM(width=W, max_depth=6, size=16, start_depth=4)
    fsm.reset_batch(1)
    seen = [planned_depth(fsm)]
    for full in (True, True, True, False, False, False, False, False):
        depth = seen[-1]
        one_cycle(fsm, depth, depth - 1 if full else depth - 2)  # all drafted tokens accepted, or one short
        seen.append(planned_depth(fsm))
    assert seen == [4, 5, 6, 6, 5, 4, 3, 2, 2]


def test_cache_fsm_moves_after_patience_agreeing_cycles():
    fsm = FSM(width=W, max_depth=8, size=16, start_depth=4, patience=2)
    fsm.reset_batch(1)
    seen = []
    for full in (True, False, True, True, True, False, False, True, False, False):
        depth = planned_depth(fsm)
        one_cycle(fsm, depth, depth - 1 if full else 0)
        seen.append(planned_depth(fsm))
    # A disagreeing cycle restarts the count; two agreeing ones move the depth and restart it too.
    assert seen == [4, 4, 4, 5, 5, 5, 4, 4, 4, 3]


# --- QLearning: Q(s, D) += lr (tokens per second - Q(s, D)), s = last accepted length -------------

def test_qlearning_updates_its_table_by_the_stated_rule():
    cost = cost_model()
    q = QLearning(cost, context=256, epsilon=0.0, lr=0.3, width=W, max_depth=6, size=60)
    q.reset_batch(1)

    def seconds(depth: int) -> float:  # the cycle's time from the cost model, root after one token
        return float(cost.cycle(depth, W, min(60, 1 + W + (depth - 2) * W * W), 256, 1))

    assert planned_depth(q) == 2  # an all-zero table: argmax is the first action
    one_cycle(q, 4, 3)  # from state 0: 4 tokens in seconds(4)
    first = 0.3 * 4 / seconds(4)
    assert q.q[0, 0, 4 - 2] == pytest.approx(first)
    assert np.count_nonzero(q.q) == 1 and q.state[0] == 3  # the next state: the accepted length
    one_cycle(q, 2, 1)  # from state 3
    assert q.q[0, 3, 0] == pytest.approx(0.3 * 2 / seconds(2)) and q.state[0] == 1
    one_cycle(q, 6, 5)  # from state 1, to the deepest state (max_depth - 1)
    assert q.q[0, 1, 6 - 2] == pytest.approx(0.3 * 6 / seconds(6)) and q.state[0] == 5
    q.state[0] = 0
    one_cycle(q, 4, 1)  # the same cell again: a step of lr towards the new reward
    assert q.q[0, 0, 2] == pytest.approx(first + 0.3 * (2 / seconds(4) - first))
    assert np.count_nonzero(q.q) == 3
    assert planned_depth(q) == 6  # state 1 now: the only depth it has a value for
    q.state[0] = 3
    assert planned_depth(q) == 2
    q.state[0] = 0
    assert planned_depth(q) == 4


def test_qlearning_explores_with_probability_epsilon():
    q = QLearning(cost_model(), epsilon=1.0, width=W, max_depth=6, size=60, seed=3)
    q.reset_batch(400)
    depths = q.plan_batch(np.arange(400), np.full(400, 256))[0]
    assert set(depths.tolist()) == {2, 3, 4, 5, 6}
    greedy = QLearning(cost_model(), epsilon=0.0, width=W, max_depth=6, size=60)
    greedy.reset_batch(400)
    greedy.q[:, 0, 3] = 1.0
    assert set(greedy.plan_batch(np.arange(400), np.full(400, 256))[0].tolist()) == {5}


def test_a_rows_exploration_draws_follow_its_stream_key_not_its_neighbours():
    """Row r's k-th draws are those of the stream keyed by the driver (its place in its queue),
    however many rows are asked at once, in whatever order, and across the stream's regrowth."""
    from simspec.policies.base import RowStreams

    alone = RowStreams(7, np.array([2]), 2)
    want = np.array([alone.next(np.array([0]))[0] for _ in range(150)])  # past the first block of 64
    crowd = RowStreams(7, np.array([0, 2, 1, 2]), 2)  # rows 1 and 3 both sit at place 2 of their queues
    got = {1: [], 3: []}
    for step in range(150):
        rows = np.array([3, 0, 1, 2]) if step % 2 else np.array([1, 3])
        for r, u in zip(rows, crowd.next(rows)):
            if r in got:
                got[r].append(u)
    assert np.array_equal(np.array(got[1]), want) and np.array_equal(np.array(got[3]), want)
    other = RowStreams(7, np.array([0]), 2).next(np.array([0]))[0]
    assert not np.array_equal(other, want[0])  # another place, another stream


# --- grid search: the best cell of the static surface -------------------------------------------

def test_grid_best_returns_the_best_cell_of_the_surface():
    cost = cost_model()
    for seed in (0, 3):
        traces = random_traces(seed)
        cells = {}
        for depth in range(1, traces.depth_max + 1):
            capacity = 1 + W + (depth - 2) * W * W if depth > 1 else 1
            for size in GRID_SIZES:
                v = min(size, capacity)
                cells[(depth, v)] = float(np.mean(replay(traces, cost, StaticPolicy(depth, W, v), 48).speedup))
        best_score = max(cells.values())
        best = min((k for k, s in cells.items() if s == best_score), key=lambda k: k[1])  # ties: the smaller V
        chosen = grid_best(traces, cost, 48)
        depth, size = (int(x[0]) for x in chosen.plan_batch(np.zeros(1, dtype=np.int64), np.zeros(1)))
        assert (depth, size) == best, seed
        assert len({round(s, 6) for s in cells.values()}) > 10  # a surface with a peak, not a plateau
