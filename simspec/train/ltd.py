"""LTD (Learning to Draft): a size policy and a depth policy, each PPO, trained separately and
then co-adapted in alternating rounds with the other one frozen.

Two of the paper's choices for its GPU carry over by their role: the depth policy's initial
training verifies the best static V of the training prompts (the paper's 60), and the 12 size
actions are V = s, 2s, ..., 12s with s = round(best static V / 6) (the paper's s = 20 puts the
best V mid-range). Ablations (LTD Tab. 4 and 7), ``ablate``: "size" trains the depth policy alone
(best static V), "depth" the size policy alone (best static depth), "rounds" both without
co-adaptation.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from simspec.policies.base import drafted_depths
from simspec.policies.learned import MLP, LTDPolicy
from simspec.sim.envs import ltd_sizes
from simspec.train.log import TrainingLog
from simspec.train.ppo import PPOConfig, ValidatedPhase, export_actor, make_ppo
from simspec.train.setting import Setting, Trained
from simspec.train.vecenv import SimVecEnv


@dataclass(frozen=True)
class LTDSchedule:
    size: PPOConfig  # initial size training (depth uniform in 1..D_max)
    depth: PPOConfig  # initial depth training (fixed V)
    rounds: int  # co-adaptation rounds, each a size phase then a depth phase
    round_size_steps: int
    round_depth_steps: int
    validations_per_phase: int = 20

    @property
    def total_steps(self) -> int:
        return self.size.steps + self.depth.steps + self.rounds * (self.round_size_steps + self.round_depth_steps)

    def steps_for(self, ablate: str | None) -> int:
        """Environment steps of a run with ``ablate`` (see ``simspec.train.setting.ABLATIONS``)."""
        return {None: self.total_steps, "size": self.depth.steps, "depth": self.size.steps,
                "rounds": self.size.steps + self.depth.steps}[ablate]


_SHARED = {"buffer": 2048, "minibatch": 256, "epochs": 20, "entropy": 0.01, "learning_rate": 1e-3, "warmup": 0.01}
SIZE_PPO = PPOConfig(policy_layers=(1024, 256), value_layers=(1024, 256), gamma=0.9, steps=100_000, **_SHARED)
DEPTH_PPO = PPOConfig(policy_layers=(1024,), value_layers=(1024, 256), gamma=0.999, steps=1_000_000, **_SHARED)

LTD_PRESETS = {
    # The paper's networks, hyper-parameters and initial steps; its rounds' steps unstated: each
    # round's phase is 10 % of that policy's initial training, from its best checkpoint.
    "paper": LTDSchedule(SIZE_PPO, DEPTH_PPO, rounds=2, round_size_steps=10_000, round_depth_steps=100_000),
    # Same networks and hyper-parameters, a tenth of the steps: minutes, not a quarter hour.
    "fast": LTDSchedule(replace(SIZE_PPO, steps=10_000), replace(DEPTH_PPO, steps=100_000), rounds=1,
                        round_size_steps=4_096, round_depth_steps=20_480, validations_per_phase=8),
    # Every phase one or two rollouts of 256 steps: seconds, for checking the wiring; learns little.
    "smoke": LTDSchedule(SIZE_PPO.smoke(), DEPTH_PPO.smoke(), rounds=1, round_size_steps=256, round_depth_steps=256,
                         validations_per_phase=1),
}


def train_ltd(setting: Setting, schedule: LTDSchedule, log: TrainingLog, progress: Callable[[int], None],
              tensorboard: str | None = None, ablate: str | None = None) -> Trained:
    s = setting
    sizes = ltd_sizes(max(1, round(s.grid_size / 6)))  # the module docstring's s
    steps_done = 0

    def env(name: str, **kwargs) -> SimVecEnv:
        return SimVecEnv(name, s.fit, s.cost, s.n_envs, seed=s.seed, max_new_tokens=s.max_new_tokens,
                         reward=s.reward, **kwargs)

    def policy(depth_net: MLP | None, size_net: MLP | None) -> LTDPolicy:
        return LTDPolicy(s.width, s.depth_max, sizes, depth_net, size_net, depth=s.grid_depth, size=s.grid_size)

    def run(model, phase: str, steps: int, validate: Callable[[MLP], float]) -> float:
        nonlocal steps_done
        rollouts = max(1, steps // (model.n_steps * model.n_envs))
        callback = ValidatedPhase(phase, validate, max(1, rollouts // schedule.validations_per_phase), log, progress,
                                  steps_done)
        model.learn(steps, callback=callback, reset_num_timesteps=True, tb_log_name=phase)
        callback.restore_best()
        steps_done += model.num_timesteps
        return callback.best_score

    # Initial trainings: the size policy under uniform depths, the depth policy at a fixed V.
    size_model = depth_model = None
    if ablate != "size":
        size_model = make_ppo(env("ltd-size", sizes=sizes), schedule.size, s.seed, tensorboard, s.precision)
        size_score = run(size_model, "size", schedule.size.steps,
                         lambda actor: s.validation_speedup(policy(None, actor)))
    if ablate != "depth":
        depth_model = make_ppo(env("ltd-depth", size=s.grid_size), schedule.depth, s.seed + 1, tensorboard, s.precision)
        depth_score = run(depth_model, "depth", schedule.depth.steps,
                          lambda actor: s.validation_speedup(policy(actor, None)))
    models = {"size": size_model, "depth": depth_model}  # best checkpoints restored (None: ablated)
    if ablate == "size":
        return Trained(policy(export_actor(depth_model), None), depth_score, steps_done, models)
    if ablate == "depth":
        return Trained(policy(None, export_actor(size_model)), size_score, steps_done, models)
    if ablate == "rounds":
        both = policy(export_actor(depth_model), export_actor(size_model))
        return Trained(both, s.validation_speedup(both), steps_done, models)

    # Co-adaptation: each policy retrained against the other frozen; the best validated pair is kept.
    best = (-np.inf, None, None, None)

    def keep_if_best(score: float, depth_net: MLP, size_net: MLP) -> None:
        nonlocal best
        if score > best[0]:
            states = (copy.deepcopy(depth_model.policy.state_dict()), copy.deepcopy(size_model.policy.state_dict()))
            best = (score, depth_net, size_net, states)

    for r in range(1, schedule.rounds + 1):
        depth_net = export_actor(depth_model)
        frozen_depth = policy(depth_net, None)

        def drafted(rows: np.ndarray, core) -> np.ndarray:  # the frozen depth policy's depths, at the rows' roots
            local = np.arange(len(rows))
            frozen_depth.reset_batch(len(rows))
            planned, _ = frozen_depth.plan_batch(local, core.context(rows))
            return drafted_depths(frozen_depth, local, planned, lambda idx, depth: core.frontier(rows[idx], depth))

        size_model.set_env(env("ltd-size", sizes=sizes, depth_policy=drafted))
        score = run(size_model, f"size-round{r}", schedule.round_size_steps,
                    lambda actor: s.validation_speedup(policy(depth_net, actor)))
        size_net = export_actor(size_model)
        keep_if_best(score, depth_net, size_net)
        depth_model.set_env(env("ltd-depth", size=s.grid_size,
                                size_policy=lambda features: sizes[size_net.act(features)]))
        score = run(depth_model, f"depth-round{r}", schedule.round_depth_steps,
                    lambda actor: s.validation_speedup(policy(actor, size_net)))
        keep_if_best(score, export_actor(depth_model), size_net)
    score, depth_net, size_net, (depth_state, size_state) = best
    depth_model.policy.load_state_dict(depth_state)  # the SB3 models saved are the kept combination's
    size_model.policy.load_state_dict(size_state)
    return Trained(policy(depth_net, size_net), float(score), steps_done, models)
