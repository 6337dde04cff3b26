"""Re-SpS: one PPO policy picks the tree's (total tokens, depth[, top-k]), held for N cycles (10 in training,
30 at inference), standard or maximum-entropy (entropy 0.1). The paper's MLP [128, 128]; the
rest SB3's PPO defaults (3e-4 constant, 10 epochs, minibatch 64, gamma 0.99), 2048-step rollouts."""

from __future__ import annotations

from collections.abc import Callable

from simspec.policies.learned import ReSpSPolicy
from simspec.sim.envs import resps_actions
from simspec.train.log import TrainingLog
from simspec.train.ppo import PPOConfig, ValidatedPhase, export_actor, make_ppo
from simspec.train.setting import VARIANTS, Setting, Trained
from simspec.train.vecenv import SimVecEnv

TRAIN_HOLD, INFERENCE_HOLD = 10, 30

_RESPS = {"policy_layers": (128, 128), "value_layers": (128, 128), "gamma": 0.99, "buffer": 2048, "minibatch": 64,
          "epochs": 10, "learning_rate": 3e-4, "warmup": 0.0, "decay": False}
RESPS_PRESETS = {"paper": PPOConfig(steps=100_000, **_RESPS), "fast": PPOConfig(steps=20_480, **_RESPS),
                 "smoke": PPOConfig(steps=2048, **_RESPS).smoke()}  # seconds: checks the wiring


def train_resps(setting: Setting, config: PPOConfig, variant: str, log: TrainingLog,
                progress: Callable[[int], None], tensorboard: str | None = None,
                validations: int = 20, hold: int = INFERENCE_HOLD, train_hold: int = TRAIN_HOLD,
                children: bool = False) -> Trained:
    """PPO with the action held ``train_hold`` cycles; the deployed policy holds it ``hold`` (Fig. 3's N).
    ``children``: the actions pick each node's top-k too (``resps_actions``)."""
    s = setting
    actions = resps_actions(s.width, s.depth_max, children, s.fit.nodes)
    config = PPOConfig(**{**config.__dict__, "entropy": VARIANTS[variant]})
    env = SimVecEnv("resps", s.fit, s.cost, s.n_envs, seed=s.seed, max_new_tokens=s.max_new_tokens, reward=s.reward,
                    hold=train_hold, children=children)
    model = make_ppo(env, config, s.seed, tensorboard, s.precision)

    def deployed(actor) -> ReSpSPolicy:
        return ReSpSPolicy(s.width, s.depth_max, actions, actor, hold)

    rollouts = max(1, config.steps // config.buffer)
    callback = ValidatedPhase(variant, lambda actor: s.validation_speedup(deployed(actor)),
                              max(1, rollouts // validations), log, progress, 0)
    model.learn(config.steps, callback=callback, tb_log_name=f"resps-{variant}")
    callback.restore_best()
    return Trained(deployed(export_actor(model)), callback.best_score, model.num_timesteps, {"resps": model})
