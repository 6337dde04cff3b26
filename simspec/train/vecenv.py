"""The simulator's MDPs as a stable-baselines3 VecEnv (imports torch through SB3, so it is kept
apart from the numpy-only simulator)."""

from __future__ import annotations

from typing import Any

import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv

from simspec.sim.costmodel import CostModel
from simspec.sim.envs import make_mdp, spaces
from simspec.sim.traces import TraceSet


class SimVecEnv(VecEnv):
    """All copies of an MDP as one SB3 VecEnv; finished copies restart at once (``terminal_observation``)."""

    render_mode = None

    def __init__(self, name: str, traces: TraceSet, cost: CostModel, n_envs: int, seed: int = 0,
                 max_new_tokens: int | None = None, **kwargs) -> None:
        self.mdp = make_mdp(name, traces, cost, n_envs, seed, max_new_tokens, **kwargs)
        observation_space, action_space = spaces(self.mdp)
        super().__init__(n_envs, observation_space, action_space)
        self._actions = np.zeros(n_envs, dtype=np.int64)
        self._all = np.arange(n_envs)

    def reset(self) -> np.ndarray:
        return self.mdp.reset(self._all)

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions).reshape(-1).astype(np.int64)

    def step_wait(self):
        reward, done = self.mdp.step(self._actions)
        obs = self.mdp.observe(self._all)
        finished = np.flatnonzero(done)
        infos: list[dict[str, Any]] = [{"terminal_observation": obs[i].copy()} if done[i] else {}
                                       for i in range(self.num_envs)]
        if len(finished):
            obs[finished] = self.mdp.reset(finished)
        return obs, reward, done, infos

    def close(self) -> None:
        pass

    def get_attr(self, attr_name: str, indices=None) -> list[Any]:
        return [getattr(self, attr_name)] * len(self._indices(indices))

    def set_attr(self, attr_name: str, value: Any, indices=None) -> None:
        setattr(self, attr_name, value)

    def env_method(self, method_name: str, *args, indices=None, **kwargs) -> list[Any]:
        return [getattr(self, method_name)(*args, **kwargs)] * len(self._indices(indices))

    def env_is_wrapped(self, wrapper_class, indices=None) -> list[bool]:
        return [False] * len(self._indices(indices))

    def seed(self, seed: int | None = None):
        self.mdp.core.seed(seed or 0)
        return [seed] * self.num_envs

    def _indices(self, indices) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        return [indices] if isinstance(indices, int) else list(indices)
