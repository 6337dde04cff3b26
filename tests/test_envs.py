"""The simulator's MDPs: Gymnasium's checker, the batched VecEnv, and agreement with replay."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from test_replay import DEPTH_MAX, cost_model, random_traces

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


@pytest.mark.parametrize("name", sorted(MDPS))
def test_vecenv_steps_a_batch_and_restarts_finished_copies(name):
    from simspec.train.vecenv import SimVecEnv

    env = SimVecEnv(name, random_traces(2), cost_model(), n_envs=16, seed=0)
    obs = env.reset()
    assert obs.shape == (16, env.observation_space.shape[0])
    finished = 0
    for _ in range(60):
        obs, reward, done, infos = env.step(np.random.default_rng(0).integers(0, env.action_space.n, 16))
        assert obs.shape[0] == 16 and reward.shape == (16,) and np.all(np.isfinite(reward))
        for i in np.flatnonzero(done):
            assert "terminal_observation" in infos[i]
        finished += int(done.sum())
    assert finished > 0


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


@pytest.mark.parametrize("name", sorted(MDPS))
def test_ppo_trains_a_few_thousand_steps_on_each(name):
    import torch
    from stable_baselines3 import PPO

    from simspec.train.vecenv import SimVecEnv

    torch.set_num_threads(1)
    env = SimVecEnv(name, random_traces(6), cost_model(), n_envs=8, seed=0)
    model = PPO("MlpPolicy", env, n_steps=128, batch_size=256, n_epochs=2, seed=0, device="cpu",
                policy_kwargs={"net_arch": [32]})
    model.learn(total_timesteps=3000)
    assert model.num_timesteps >= 3000
    action, _ = model.predict(env.reset(), deterministic=True)
    assert action.shape == (8,)
