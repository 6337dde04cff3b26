"""The simulator's MDPs: Gymnasium's checker and agreement with replay (numpy only: the SB3
VecEnv and PPO on it are tested in test_train.py)."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from helpers import DEPTH_MAX, cost_model, random_traces

from simspec.policies import StaticPolicy
from simspec.sim.envs import MDPS, SimEnv, radar_dataset, resps_actions
from simspec.sim.replay import replay
from simspec.sim.traces import accepted_lengths


@pytest.mark.parametrize("name", sorted(MDPS))
def test_every_mdp_passes_gymnasiums_checker(name):
    env = SimEnv(name, random_traces(1), cost_model(), seed=0)
    check_env(env, skip_render_check=True)
    obs, _ = env.reset(seed=3)
    total, steps = 0.0, 0
    done = False
    while not done and steps < 500:
        obs, reward, done, truncated, _ = env.step(env.action_space.sample())
        assert env.observation_space.contains(obs) and np.isfinite(reward)
        total, steps = total + reward, steps + 1
    assert done


def test_ltd_depth_env_with_a_fixed_stop_matches_static_replay():
    """CONTINUE until depth D, every cycle: the rewards' cycles are the static (D, V) replay's."""
    traces, cost = random_traces(4), cost_model()
    depth, size = 4, 6
    env = SimEnv("ltd-depth", traces, cost, size=size)
    env.reset(seed=0)
    core = env.mdp.core
    prompt = int(core.prompt[0])
    cycles = 0
    while True:  # one episode per cycle; the prompt carries on across resets
        done = False
        while not done:
            action = 1 if env.mdp.depth[0] < depth else 0
            _, reward, done, _, _ = env.step(action)
        assert reward > 0 and int(core.prompt[0]) == prompt
        cycles += 1
        if core.prompt_over[0]:
            break
        env.reset()
    one = traces.subset(np.array([prompt]))
    assert cycles == int(replay(one, cost, StaticPolicy(depth, traces.width, size)).cycles[0])


def test_radar_table_and_resps_actions():
    traces = random_traces(5)
    table = radar_dataset(traces, size=8)
    assert table.shape == (traces.positions, DEPTH_MAX - 1)
    for position in (0, 7, traces.positions - 1):
        for calls in (1, 3, DEPTH_MAX - 1):
            depth = calls + 1
            v = min(8, 1 + traces.width + (depth - 2) * traces.width ** 2)
            expected = accepted_lengths(traces.path_rank[position:position + 1], depth, v)[0]
            assert table[position, calls - 1] == expected
    pairs = resps_actions(10, 12)
    assert all(tt <= 10 ** (d - 1) for tt, d in pairs) and len(pairs) == 6 * 6 - 1  # (128, 3): 128 > 10**2


def _rewards(name: str, traces, seed: int, steps: int = 200) -> list[float]:
    """One episode's rewards under a fixed action sequence, the env (and its draws) seeded ``seed``."""
    env = SimEnv(name, traces, cost_model(), seed=seed)
    env.reset(seed=seed)
    actions, out = np.random.default_rng(7), []
    for _ in range(steps):
        _, reward, done, _, _ = env.step(int(actions.integers(env.action_space.n)))
        out.append(float(reward))
        if done:
            break
    return out


@pytest.mark.parametrize("name", sorted(MDPS))
def test_every_mdp_passes_the_checker_on_sampled_traces_and_one_seed_repeats_an_episode(name):
    """At T > 0 each cycle's acceptance is drawn from its tree's law (the draws themselves:
    test_sampled_replay.py): the envs still pass Gymnasium's checker, and a seeded reset repeats
    an episode, draws included, so that training at T = 1 is reproducible."""
    from helpers import sampled_traces

    traces = sampled_traces(1, n_prompts=5, width=2, nodes=8)
    check_env(SimEnv(name, traces, cost_model(), seed=0), skip_render_check=True)
    for seed in range(4):
        assert _rewards(name, traces, seed) == _rewards(name, traces, seed)


def test_radar_draws_average_to_the_expected_table_and_are_the_path_at_t0():
    """RADAR's offline data drawn from each tree's acceptance-length law (``rng``): their mean over
    many draws is the expected table; at T = 0 a draw is the greedy path's value."""
    from helpers import sampled_traces

    traces = sampled_traces(3, nodes=8)
    rows = np.repeat(np.arange(traces.positions), 400)
    drawn = radar_dataset(traces, 8, rows=rows, rng=np.random.default_rng(0))
    assert set(np.unique(drawn)) > {0.0, 1.0}  # draws, not expectations
    per_position = drawn.reshape(traces.positions, 400, -1)
    # per number of draft calls, summed over positions: the draws' total against the expected one
    total, expected = per_position.mean(1).sum(0), radar_dataset(traces, 8).sum(0)
    spread = np.sqrt((per_position.var(1) / 400).sum(0))
    assert np.all(np.abs(total - expected) < 4 * spread + 1e-9), (total, expected, spread)
    assert np.all(np.abs(total - (expected + 0.05 * traces.positions)) > 4 * spread)  # power: 0.05 tokens off
    greedy = random_traces(5)
    assert np.array_equal(radar_dataset(greedy, 8, rows=np.arange(greedy.positions), rng=np.random.default_rng(0)),
                          radar_dataset(greedy, 8))


def test_resps_top_k_picks_each_nodes_children_and_at_full_width_is_the_width_variant():
    """Re-SpS choosing its top-k (``children``): (TT, d, k) triples within the traces' width and node
    budget; Gymnasium's checker passes; holding k = W replays the (TT, d) variant draw for draw, and
    a smaller k does not."""
    from helpers import sampled_traces

    triples = resps_actions(10, 12, children=True, nodes=64)
    assert {int(k) for k in triples[:, 2]} == {2, 4, 6, 10} and triples[:, 0].max() == 64
    assert all(tt <= k ** (d - 1) for tt, d, k in triples) and len(np.unique(triples, axis=0)) == len(triples)
    traces = sampled_traces(2, n_prompts=6, width=4, nodes=16)
    check_env(SimEnv("resps", traces, cost_model(), seed=0, children=True), skip_render_check=True)
    pairs, triples = resps_actions(4, DEPTH_MAX), resps_actions(4, DEPTH_MAX, children=True, nodes=16)
    runs = {}
    for k in (None, 4, 2):  # TT: every one above the 16 nodes held, so (TT, d) verifies as (16, d)
        by_depth = {int(d): i for i, (tt, d, kk) in enumerate(triples) if kk == k}
        env = SimEnv("resps", traces, cost_model(), seed=3, children=k is not None)
        env.reset(seed=3)
        actions, out = np.random.default_rng(7), []
        for _ in range(40):
            tt, d = pairs[actions.integers(len(pairs))]
            out.append(env.step(int(np.flatnonzero((pairs == (tt, d)).all(1))[0]) if k is None else
                                by_depth[max(int(d), min(by_depth))])[1])
        runs[k] = out
    assert runs[None] == runs[4] and runs[2] != runs[4]
