"""Learned policies: the environments that train them and the deployed numpy policies see the
same observations and make the same decisions; the artifact round-trips and refuses bad files;
training is reproducible from a seed."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from helpers import DEPTH_MAX, cost_model, random_lstm, random_ltd, random_resps, random_traces

from simspec.errors import SimspecError
from simspec.policies.artifact import ProfileMismatch, load_policy, write_policy
from simspec.policies.learned import RadarPolicy
from simspec.sim.envs import SimEnv, radar_observations
from simspec.sim.replay import replay


class Recording:
    """Wraps a policy and records the (depth, size, accepted) of every cycle it observes."""

    def __init__(self, policy):
        self.policy, self.cycles = policy, []
        inner = policy.observe_batch

        def observe_batch(rows, depth, size, accepted):
            self.cycles.append((int(depth[0]), int(size[0]), int(accepted[0])))
            inner(rows, depth, size, accepted)
        policy.observe_batch = observe_batch


def _env_cycles_ltd(traces, cost, policy, seed):
    """Drive the LTD depth environment with the policy's own networks (size chosen by its size
    network, as in co-adaptation); returns the prompt and its cycles."""
    env = SimEnv("ltd-depth", traces, cost, size=6,
                 size_policy=lambda features: policy.sizes[policy.size_net.act(features)])
    obs, _ = env.reset(seed=seed)
    core = env.mdp.core
    prompt, cycles = int(core.prompt[0]), []
    while True:
        done = False
        while not done:
            action = int(policy.depth_net.act(obs[None])[0])
            depth = int(env.mdp.depth[0])
            obs, _, done, _, _ = env.step(action)
        cycles.append((depth + int(action == 1), int(core.previous[0])))  # CONTINUE into D_max also stops
        if core.prompt_over[0]:
            break
        obs, _ = env.reset()
    return prompt, cycles


def test_ltd_policy_decides_alike_in_its_training_env_and_in_replay():
    seen = set()
    for seed in range(6):
        traces, cost = random_traces(seed), cost_model()
        policy = random_ltd(traces.width, DEPTH_MAX, seed)
        prompt, env_cycles = _env_cycles_ltd(traces, cost, policy, seed)
        recorded = Recording(random_ltd(traces.width, DEPTH_MAX, seed))
        replay(traces.subset(np.array([prompt])), cost, recorded.policy)
        assert [(d, a) for d, _, a in recorded.cycles] == env_cycles, seed
        seen |= {(d, v) for d, v, _ in recorded.cycles}
    # The random networks really decide: several depths and several sizes were chosen.
    assert len({d for d, _ in seen}) > 1 and len({v for _, v in seen}) > 1, seen


def test_resps_policy_holds_its_choice_and_matches_its_env():
    traces, cost = random_traces(3), cost_model()
    hold = 3
    env = SimEnv("resps", traces, cost, hold=hold)
    obs, _ = env.reset(seed=0)
    core = env.mdp.core
    prompt, chosen = int(core.prompt[0]), []
    policy = random_resps(traces.width, DEPTH_MAX, hold)
    while True:
        action = int(policy.net.act(obs[None])[0])
        chosen.append(tuple(env.mdp.actions[action]))
        env.step(action)
        if core.prompt_over[0]:
            break
        obs, _ = env.reset()
    recorded = Recording(random_resps(traces.width, DEPTH_MAX, hold))
    replay(traces.subset(np.array([prompt])), cost, recorded.policy)
    depths = [d for d, _, _ in recorded.cycles]
    expected = [d for _, d in chosen for _ in range(hold)][: len(depths)]
    assert depths == expected


def test_radar_policy_reads_the_observations_its_training_uses():
    traces, cost = random_traces(4), cost_model()
    net = random_lstm(traces.width + 1, 8, 5)
    recorded = Recording(RadarPolicy(traces.width, DEPTH_MAX, net, size=6))
    replay(traces.subset(np.array([0])), cost, recorded.policy)
    # The first cycle, by hand: the LSTM over radar_observations at the prompt's first root.
    h = c = np.zeros((1, 8), dtype=np.float32)
    calls = 1
    while calls < DEPTH_MAX - 1:
        logits, h, c = net.step(radar_observations(traces, np.array([0]), np.array([calls])), h, c)
        if np.argmax(logits[0]) == 0:
            break
        calls += 1
    assert recorded.cycles[0][0] == calls + 1


def _meta(algo: str, spec: dict) -> dict:
    return {"algo": algo, "name": "p", "policy": spec, "profile": {"name": "prof", "inputs_hash": "abc"}}


def test_artifact_round_trip_and_bad_files(tmp_path):
    policy = random_ltd(2, DEPTH_MAX)
    spec = {"width": 2, "depth_max": DEPTH_MAX, "sizes": policy.sizes.tolist(), "size": 6}
    arrays = {**policy.depth_net.arrays("depth"), **policy.size_net.arrays("size")}
    path = write_policy(tmp_path / "p", _meta("ltd", spec), arrays)
    loaded, meta = load_policy(path, profile_hash="abc")
    traces, cost = random_traces(1), cost_model()
    a, b = replay(traces, cost, policy), replay(traces, cost, loaded)
    assert np.array_equal(a.cycles, b.cycles) and np.array_equal(a.draft_calls, b.draft_calls)
    assert meta.to_json()["schema"] == "simspec-policy" and "simspec_version" in meta.to_json()

    with pytest.warns(ProfileMismatch, match="trained on profile prof"):
        load_policy(path, profile_hash="other")
    with pytest.raises(SimspecError, match="exists"):
        write_policy(tmp_path / "p", _meta("ltd", spec), arrays)
    with pytest.raises(SimspecError, match="no policy"):
        load_policy(tmp_path / "missing")
    (path / "policy.npz").write_bytes(b"not a zip")
    with pytest.raises(SimspecError, match="unreadable"):
        load_policy(path)
    (path / "policy.json").write_text("{")
    with pytest.raises(SimspecError, match="unreadable"):
        load_policy(path)
    (path / "policy.json").write_text(json.dumps({"schema": "simspec-policy", "schema_version": 99}))
    with pytest.raises(SimspecError, match="retrain"):
        load_policy(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(SimspecError):  # incomplete arrays: refused before anything is written
            write_policy(tmp_path / "q", _meta("ltd", spec), {"depth.0.weight": np.zeros((2, 2))})
    assert not (tmp_path / "q").exists()
