"""Stable-baselines3 PPO as the seeds configure it, on the simulator's VecEnv: the warm-up +
linear-decay learning rate, the actor's export to numpy, and a callback that validates the
deployed policy in replay and keeps the best checkpoint, as LTD does."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import MlpExtractor

from simspec.blas import one_blas_thread
from simspec.policies.learned import MLP
from simspec.train.log import TrainingLog
from simspec.train.setting import PRECISIONS


@dataclass(frozen=True)
class PPOConfig:
    """One PPO training phase. ``buffer`` is the rollout size over all copies (SB3's n_steps x n_envs),
    so the number of copies changes speed, not the learning problem."""

    policy_layers: tuple[int, ...]
    value_layers: tuple[int, ...]
    gamma: float
    steps: int
    buffer: int = 2048
    minibatch: int = 256
    epochs: int = 20
    entropy: float = 0.01
    learning_rate: float = 1e-3
    warmup: float = 0.01  # fraction of the phase with a linearly rising learning rate, then linear decay
    decay: bool = True  # False: constant learning rate (SB3's default)
    gae_lambda: float = 0.95
    n_envs: int = 16

    def smoke(self) -> PPOConfig:
        """The ``smoke`` preset's phase: the same networks, two rollouts of 256 steps, two epochs."""
        return replace(self, steps=512, buffer=256, epochs=2)


def warmup_then_linear(peak: float, warmup: float, decay: bool = True) -> Callable[[float], float]:
    """SB3 schedule (of progress remaining, 1 -> 0): up to ``peak`` over ``warmup``, then linearly to 0."""
    def schedule(remaining: float) -> float:
        if not decay:
            return peak
        done = 1.0 - remaining
        if warmup > 0 and done < warmup:
            return peak * done / warmup
        return peak * max(1.0 - done, 0.0) / (1.0 - warmup)
    return schedule


class BF16Extractor(MlpExtractor):
    """SB3's actor and critic trunks with hidden layers in bfloat16 (autocast), in rollouts and updates
    alike, so PPO's ratio starts each update at exactly 1. Weights, Adam, heads, losses and the
    exported actor stay fp32; halves the update time on a CPU with native bf16."""

    def forward_actor(self, features: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return super().forward_actor(features).float()

    def forward_critic(self, features: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return super().forward_critic(features).float()


class BF16Policy(ActorCriticPolicy):
    """SB3's MlpPolicy built on ``BF16Extractor``."""

    def _build_mlp_extractor(self) -> None:
        self.mlp_extractor = BF16Extractor(self.features_dim, net_arch=self.net_arch,
                                           activation_fn=self.activation_fn, device=self.device)


class SimPPO(PPO):
    """SB3's PPO, learning with exact shortcuts for a CPU learner: no argument validation of distributions,
    single-threaded numpy BLAS (the simulator's small products would leave OpenBLAS threads spinning on
    torch's cores)."""

    def learn(self, *args, **kwargs):
        checks = torch.distributions.Distribution._validate_args
        torch.distributions.Distribution.set_default_validate_args(False)
        try:
            with one_blas_thread():
                return super().learn(*args, **kwargs)
        finally:
            torch.distributions.Distribution.set_default_validate_args(checks)


def make_ppo(env, config: PPOConfig, seed: int, tensorboard: str | None, precision: str = "fp32") -> SimPPO:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    model = SimPPO(BF16Policy if precision == "bf16" else "MlpPolicy", env,
                   learning_rate=warmup_then_linear(config.learning_rate, config.warmup, config.decay),
                   n_steps=config.buffer // env.num_envs, batch_size=config.minibatch, n_epochs=config.epochs,
                   gamma=config.gamma, gae_lambda=config.gae_lambda, ent_coef=config.entropy,
                   policy_kwargs={"net_arch": {"pi": list(config.policy_layers), "vf": list(config.value_layers)},
                                  # SB3's Adam (its eps 1e-5, which any optimizer_kwargs replace), as one
                                  # fused kernel per step instead of a dozen per parameter tensor
                                  "optimizer_kwargs": {"eps": 1e-5, "fused": True}},
                   tensorboard_log=tensorboard, seed=seed, device="cpu", verbose=0)
    if tensorboard is None:  # SB3's default logger makes an empty /tmp/SB3-<time> folder at every learn()
        model.set_logger(Logger(folder=None, output_formats=[]))
    return model


def export_actor(model: PPO) -> MLP:
    """The deterministic actor as numpy: the policy branch's linear layers and the action head."""
    linears = [m for m in model.policy.mlp_extractor.policy_net if isinstance(m, torch.nn.Linear)]
    linears.append(model.policy.action_net)
    return MLP(tuple((layer.weight.detach().numpy().T.copy(), layer.bias.detach().numpy().copy()) for layer in linears))


class ValidatedPhase(BaseCallback):
    """Per rollout, the mean reward goes to the log; every ``validate_every`` rollouts (and at the end)
    ``validate(actor)`` scores the deployed policy and the best weights are kept. Both also go to
    SB3's logger (``rollout/reward``, ``validation/speedup``)."""

    def __init__(self, phase: str, validate: Callable[[MLP], float], validate_every: int, log: TrainingLog,
                 progress: Callable[[int], None], step_offset: int) -> None:
        super().__init__()
        self.phase, self.validate, self.validate_every, self.log = phase, validate, validate_every, log
        self.progress, self.step_offset = progress, step_offset
        self.rollouts, self.best_score, self.best_state = 0, -np.inf, None

    def _on_step(self) -> bool:
        self.progress(self.training_env.num_envs)
        return True

    def _on_rollout_end(self) -> None:
        self.rollouts += 1
        score = self._check() if self.rollouts % self.validate_every == 0 else None
        reward = float(self.model.rollout_buffer.rewards.mean())
        self.log.add(self.phase, self.step_offset + self.num_timesteps, reward, score)
        self.logger.record("rollout/reward", reward)  # written by SB3's next dump, right after this rollout
        if score is not None:
            self.logger.record("validation/speedup", score)

    def _check(self) -> float:
        score = float(self.validate(export_actor(self.model)))
        if score > self.best_score:
            self.best_score, self.best_state = score, copy.deepcopy(self.model.policy.state_dict())
        return score

    def _on_training_end(self) -> None:  # after the last update
        score = self._check()
        self.log.add(self.phase, self.step_offset + self.num_timesteps, None, score)
        self.logger.record("validation/speedup", score)
        self.logger.dump(self.num_timesteps)  # SB3 dumps no more after its last update

    def restore_best(self) -> None:
        """Puts the best validated weights back into the model (LTD keeps that checkpoint)."""
        if self.best_state is not None:
            self.model.policy.load_state_dict(self.best_state)
