"""Training: same seed, same policy (for every algorithm, on tiny schedules), and the
`simspec train` command end to end on the shipped profile, bad input included."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from test_replay import cost_model, random_traces

from simspec.train.log import TrainingLog
from simspec.train.ltd import LTDSchedule, train_ltd
from simspec.train.ppo import PPOConfig
from simspec.train.radar import RadarConfig, train_radar
from simspec.train.resps import train_resps
from simspec.train.setting import Setting


def tiny_setting(seed: int, precision: str = "fp32") -> Setting:
    traces = random_traces(7)
    fit, validation = traces.subset(np.arange(5)), traces.subset(np.array([5, 6]))
    return Setting(None, cost_model(), traces, fit, validation, validation, grid_depth=3, grid_size=4,
                   reward="throughput", seed=seed, n_envs=4, precision=precision)


def _tiny_ppo(gamma: float) -> PPOConfig:
    return PPOConfig((16,), (16,), gamma, steps=512, buffer=256, minibatch=64, epochs=2)


TINY_LTD = LTDSchedule(_tiny_ppo(0.9), _tiny_ppo(0.999), rounds=1, round_size_steps=256, round_depth_steps=256,
                       validations_per_phase=2)


def _ltd_arrays(seed, precision="fp32"):
    result = train_ltd(tiny_setting(seed, precision), TINY_LTD, TrainingLog(), lambda n: None)
    return {**result.policy.depth_net.arrays("d"), **result.policy.size_net.arrays("s")}


def _ltd_bf16_arrays(seed):
    return _ltd_arrays(seed, "bf16")


def _resps_arrays(seed):
    return train_resps(tiny_setting(seed), _tiny_ppo(0.99), "standard", TrainingLog(), lambda n: None,
                       validations=2).policy.net.arrays("n")


def _radar_arrays(seed):
    config = RadarConfig(hidden=8, updates=20, batch=32, validations=2, learning_rate=1e-2)
    return train_radar(tiny_setting(seed), config, TrainingLog(), lambda n: None).policy.net.arrays("l")


@pytest.mark.parametrize("train", [_ltd_arrays, _ltd_bf16_arrays, _resps_arrays, _radar_arrays],
                         ids=["ltd", "ltd-bf16", "resps", "radar"])
def test_same_seed_same_policy(train):
    import torch

    torch.set_num_threads(1)
    first, again, other = train(0), train(0), train(1)
    assert first.keys() == again.keys()
    assert all(np.array_equal(first[k], again[k]) for k in first)
    assert not all(np.array_equal(first[k], other[k]) for k in first)


def test_ppo_learns_with_sb3_adam_and_restores_global_state():
    """SimPPO is SB3's PPO with its Adam (eps 1e-5) fused, learning without per-minibatch
    distribution checks and with single-threaded numpy BLAS, both restored afterwards."""
    import torch
    from stable_baselines3.common.callbacks import BaseCallback
    from threadpoolctl import threadpool_info

    from simspec.train.vecenv import SimVecEnv
    from simspec.train.ppo import make_ppo

    s = tiny_setting(0)
    model = make_ppo(SimVecEnv("ltd-depth", s.fit, s.cost, 4, size=4), _tiny_ppo(0.9), 0, None)
    group = model.policy.optimizer.param_groups[0]
    assert isinstance(model.policy.optimizer, torch.optim.Adam) and group["eps"] == 1e-5 and group["fused"]
    seen = []

    class Probe(BaseCallback):
        def _on_step(self) -> bool:
            blas = [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]
            seen.append((torch.distributions.Distribution._validate_args, blas))
            return True

    before = torch.distributions.Distribution._validate_args
    model.learn(512, callback=Probe())
    assert seen and all(checks is False and all(n == 1 for n in blas) for checks, blas in seen)
    assert torch.distributions.Distribution._validate_args == before


def test_bf16_policy_multiplies_hidden_layers_in_bf16_and_keeps_the_rest_fp32():
    """The mixed-precision policy: hidden layers in bf16, weights, heads and log-probabilities in
    fp32, and the rollout's log-probability equal to the update's (PPO's ratio starts at 1)."""
    import torch

    from simspec.train.vecenv import SimVecEnv
    from simspec.train.ppo import BF16Extractor, export_actor, make_ppo

    s = tiny_setting(0)
    env = SimVecEnv("ltd-size", s.fit, s.cost, 4, sizes=np.arange(1, 13))
    mixed, plain = (make_ppo(env, _tiny_ppo(0.9), 0, None, precision) for precision in ("bf16", "fp32"))
    assert isinstance(mixed.policy.mlp_extractor, BF16Extractor)
    assert all(p.dtype == torch.float32 for p in mixed.policy.parameters())
    plain.policy.load_state_dict(mixed.policy.state_dict())  # same weights, two precisions
    hidden = []
    mixed.policy.mlp_extractor.policy_net[0].register_forward_hook(lambda m, i, o: hidden.append(o.dtype))
    obs = torch.as_tensor(env.reset())
    with torch.no_grad():
        actions, values, log_prob = mixed.policy(obs, deterministic=True)
        values_again, log_prob_again, _ = mixed.policy.evaluate_actions(obs, actions)
        _, plain_log_prob, _ = plain.policy.evaluate_actions(obs, actions)
    assert hidden and set(hidden) == {torch.bfloat16}
    assert values.dtype == log_prob.dtype == torch.float32
    assert torch.equal(log_prob, log_prob_again) and torch.equal(values, values_again)
    gap = (log_prob - plain_log_prob).abs().max().item()
    assert 0 < gap < 0.05  # bf16 rounding shows, and stays small
    exported = export_actor(mixed)  # the deployed actor is the fp32 network
    assert all(w.dtype == np.float32 for w, _ in exported.layers)
    with pytest.raises(ValueError, match="precision"):
        make_ppo(env, _tiny_ppo(0.9), 0, None, "fp16")


def _simspec(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "simspec.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_train_command_end_to_end_and_bad_input(tmp_path):
    out = tmp_path / "radar"
    done = _simspec("train", "--simulated", "--profile", "calibration/cpu-demo", "--algo", "radar",
                    "--preset", "fast", "--out", str(out), "--threads", "1", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(summary) == {"policy", "algo", "train_seconds", "env_steps", "heldout_speedup", "grid_best_speedup",
                            "eagle3_speedup", "oracle_share"}
    assert summary["heldout_speedup"] > summary["eagle3_speedup"]  # RADAR beats EAGLE-3's tree on this CPU
    meta = json.loads((out / "policy.json").read_text())
    assert meta["profile"]["name"] == "cpu-demo" and meta["decision_seconds"] > 0 and meta["traces_hash"]
    assert meta["precision"] == "fp32"  # RADAR's LSTM trains in fp32
    # cpu-demo predates the stored RADAR timing: T_policy is measured, and the metadata says so.
    assert meta["schedule"]["policy_seconds_source"].startswith("measured")
    assert (out / "training.csv").exists() and (out / "radar_lstm.pt").exists()

    figure = _simspec("plot", "training", "--policy", str(out), "--out", str(tmp_path / "fig"))
    assert figure.returncode == 0 and (tmp_path / "fig" / "training-radar.png").exists()
    scored = _simspec("validate", "--simulated", "--profile", "calibration/cpu-demo", "--baselines", "eagle3",
                      "--policies", str(out), "--json")
    assert scored.returncode == 0, scored.stderr
    assert [r["method"] for r in json.loads(scored.stdout.strip().splitlines()[-1])["rows"]] == ["eagle3", "radar"]

    for args, message in [
        (("--algo", "nope"), "unknown --algo"),
        (("--algo", "ltd", "--variant", "maxent"), "--variant applies to --algo resps only"),
        (("--algo", "radar", "--out", str(out)), "exists"),
        (("--algo", "radar", "--reward", "speed"), "unknown --reward"),
        (("--algo", "ltd", "--precision", "fp16"), "unknown --precision"),
        (("--algo", "radar", "--precision", "bf16"), "--precision bf16 applies to the PPO algorithms"),
    ]:
        bad = _simspec("train", "--simulated", "--profile", "calibration/cpu-demo", *args)
        assert bad.returncode == 2 and message in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    missing = _simspec("train", "--simulated", "--profile", str(tmp_path / "none"), "--algo", "radar",
                       "--out", str(tmp_path / "x"))
    assert missing.returncode == 2 and "no profile" in missing.stderr and not (tmp_path / "x").exists()
