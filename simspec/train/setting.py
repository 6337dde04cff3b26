"""What every training run shares: the cost model, the traces split three ways (fit, validation to
pick checkpoints, held-out for the final report), the best static tree, and the reward."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simspec.errors import SimspecError
from simspec.policies.base import BatchPolicy
from simspec.sim.costmodel import CostModel
from simspec.sim.evaluate import grid_best, split_traces
from simspec.sim.profile import Profile
from simspec.sim.replay import mean_speedup, replay
from simspec.sim.traces import TraceSet

# Choices that requests check before any heavy import (torch, SB3).
PRECISIONS = ("fp32", "bf16")  # PPO's hidden layers (simspec.train.ppo)
VARIANTS = {"standard": 0.0, "maxent": 0.1}  # Re-SpS: PPO's entropy coefficient
ABLATIONS = ("size", "depth", "rounds")  # what LTD's ablations leave out (simspec.train.ltd)


@dataclass(frozen=True)
class Setting:
    profile: Profile
    cost: CostModel
    train: TraceSet  # the profile's training split: fit + validation
    fit: TraceSet
    validation: TraceSet
    heldout: TraceSet
    grid_depth: int
    grid_size: int
    reward: str
    seed: int
    max_new_tokens: int | None = None
    n_envs: int = 16
    precision: str = "fp32"  # PPO's hidden layers: fp32 or bf16 (see simspec.train.ppo.BF16Extractor)

    @property
    def width(self) -> int:
        return self.fit.width

    @property
    def depth_max(self) -> int:
        return self.fit.depth_max

    def validation_speedup(self, policy: BatchPolicy) -> float:
        """Mean replay speedup of the deployed policy on the validation prompts."""
        return mean_speedup(replay(self.validation, self.cost, policy, self.max_new_tokens))


@dataclass
class Trained:
    """A training run's outcome; ``models``: the trained torch models by part (None: a part ablated)."""

    policy: BatchPolicy
    validation_speedup: float
    env_steps: int
    models: dict[str, object]


def prepare(profile: Profile, reward: str, seed: int, validation_share: float = 0.2,
            max_new_tokens: int | None = None, precision: str = "fp32") -> Setting:
    traces = profile.traces()
    train, heldout = split_traces(traces, "train"), split_traces(traces, "heldout")
    if train.n_prompts < 5:
        raise SimspecError(f"the traces of {profile.directory} hold {train.n_prompts} training prompts; "
                           "training needs at least 5: record more prompts with `simspec calibrate`")
    # Every k-th training prompt validates: a fixed, spread-out choice that does not depend on the seed.
    every = max(2, round(1 / validation_share))
    chosen = np.arange(train.n_prompts) % every == every - 1
    best = grid_best(train, profile.cost, max_new_tokens)
    depth, size = (int(x[0]) for x in best.plan_batch(np.zeros(1, dtype=np.int64), np.zeros(1)))
    return Setting(profile, profile.cost, train, train.subset(np.flatnonzero(~chosen)),
                   train.subset(np.flatnonzero(chosen)), heldout, depth, size, reward, seed, max_new_tokens,
                   precision=precision)
