"""The contract every simulator MDP keeps: ``n`` copies stepped in numpy, which ``SimEnv`` and
``SimVecEnv`` wrap without knowing the MDP. A new one registers with ``envs.register_mdp``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from simspec.sim.envs import Core


@runtime_checkable
class BatchedMDP(Protocol):
    core: Core  # the shared replay state: prompts, positions, the cost model, the reward
    n_actions: int  # actions are 0 .. n_actions - 1 (a Discrete space)
    obs_dim: int  # observations are float32 vectors of this length (a Box space)

    def observe(self, rows: np.ndarray) -> np.ndarray:
        """Observations of copies ``rows``: [len(rows), obs_dim] float32."""

    def reset(self, rows: np.ndarray) -> np.ndarray:
        """Starts the next episode of copies ``rows``; returns their observations."""

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One action per copy; (reward [n] float32, done [n] bool). A done copy is ``reset`` next."""
