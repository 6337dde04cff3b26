"""The contract every simulator MDP keeps (``simspec.sim.envs``): a batched core stepping ``n``
independent copies in numpy, which ``SimEnv`` (one copy, a Gymnasium env) and
``simspec.train.vecenv.SimVecEnv`` (all copies, an SB3 VecEnv) wrap without knowing which MDP
they hold. A new MDP implements these members and registers with ``envs.register_mdp``."""

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
        """Starts the next episode of copies ``rows`` (a copy's prompt carries on until decoded
        to its budget); returns their observations."""

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One action per copy ([n] ints); returns (reward [n] float32, done [n] bool). A done
        copy must be ``reset`` before it steps again."""
