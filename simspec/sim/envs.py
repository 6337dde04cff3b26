"""Gymnasium environments for the seeds' MDPs, on recorded traces and a cost model.

Every environment is written once as a *batched core* that steps ``n`` independent copies
with numpy (state in arrays, no loop over copies). ``SimEnv`` exposes one copy as a
``gymnasium.Env`` (it passes ``check_env``); ``simspec.sim.vecenv.SimVecEnv`` exposes all of
them as a stable-baselines3 ``VecEnv``, which is what PPO trains on (it lives apart because
stable-baselines3 imports torch, and this module must not). An episode is one prompt decoded to
its token budget (RADAR: one cycle), prompts drawn at random from the traces.

Rewards are cycle throughputs, (accepted + 1) / cycle seconds, divided by plain greedy
decoding's throughput at the profile's median context, so that a reward of 1.0 means "as fast
as greedy" and rewards are O(1) on any hardware.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from simspec.policies.base import tree_capacities
from simspec.sim.costmodel import CostModel
from simspec.sim.replay import positions_limit
from simspec.sim.traces import TraceSet, accepted_at

SCORE_FLOOR = -30.0  # log-prob floor for observations: padding and hopeless nodes look alike
CONTEXT_SCALE = 4096.0


class Core:
    """Shared state: which prompt each copy decodes and where its root is."""

    def __init__(self, traces: TraceSet, cost: CostModel, n: int, max_new_tokens: int | None, seed: int) -> None:
        self.traces, self.cost, self.n = traces, cost, n
        self.width, self.dmax = traces.width, traces.depth_max
        self.limit_of = positions_limit(traces, max_new_tokens)
        keep = np.flatnonzero(self.limit_of > 0)
        if len(keep) == 0:
            raise ValueError("no trace prompt has a position to decode")
        self.prompts = keep
        self.rng = np.random.default_rng(seed)
        self.prompt = np.zeros(n, dtype=np.int64)
        self.position = np.zeros(n, dtype=np.int64)
        self.previous = np.zeros(n, dtype=np.int64)
        self.reward_scale = float(cost.greedy(np.median(traces.context_length)))  # seconds per greedy token

    def seed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def restart(self, rows: np.ndarray) -> None:
        self.prompt[rows] = self.rng.choice(self.prompts, size=len(rows))
        self.position[rows] = 0
        self.previous[rows] = 0

    def at(self, rows: np.ndarray) -> np.ndarray:
        # A finished copy still gets a (last-position) observation before it restarts.
        last = self.limit_of[self.prompt[rows]] - 1
        return self.traces.prompt_offsets[self.prompt[rows]] + np.minimum(self.position[rows], last)

    def context(self, rows: np.ndarray) -> np.ndarray:
        return self.traces.context_length[self.at(rows)]

    def finish_cycle(self, rows: np.ndarray, depth: np.ndarray, size: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Verify the rows' trees; returns (reward, accepted, done) and advances the roots."""
        at = self.at(rows)
        size = np.clip(size, 1, tree_capacities(depth, self.width))
        accepted = accepted_at(self.traces.path_rank, at, depth, size)
        seconds = self.cost.cycle(depth, self.width, size, self.traces.context_length[at], self.previous[rows] + 1)
        reward = (accepted + 1) / seconds * self.reward_scale
        self.position[rows] += accepted + 1
        self.previous[rows] = accepted
        done = self.position[rows] >= self.limit_of[self.prompt[rows]]
        return reward.astype(np.float32), accepted, done

    def frontier(self, rows: np.ndarray, depth: np.ndarray) -> np.ndarray:
        """Scores of the newest level of a ``depth``-level tree, [rows, W**2]."""
        scores = self.traces.level_scores[self.at(rows), depth - 2].astype(np.float32)
        return np.maximum(scores, SCORE_FLOOR)

    def tree_scores(self, rows: np.ndarray, depth: np.ndarray) -> np.ndarray:
        """All node scores of ``depth``-level trees, [rows, (D_max - 1) * W**2]."""
        scores = self.traces.level_scores[self.at(rows)].astype(np.float32)
        scores[np.arange(self.dmax - 1)[None, :] >= (depth - 1)[:, None]] = SCORE_FLOOR
        return np.maximum(scores, SCORE_FLOOR).reshape(len(rows), -1)


class LTDDepth:
    """LTD's depth MDP: after every draft step, CONTINUE (1) or STOP (0). Observation: the
    newest level's candidate scores (W**2), the depth so far / D_max, the context / 4096.
    Reward: the cycle's throughput at STOP (or when D_max forces it), 0 after CONTINUE. The
    verified size is fixed (LTD trains its depth policy at V = 60) or set by ``size_policy``
    (co-adaptation: ``size_policy(obs_of_size_env) -> action index``)."""

    n_actions = 2

    def __init__(self, core: Core, size: int = 60, size_policy=None) -> None:
        self.core, self.size, self.size_policy = core, size, size_policy
        self.depth = np.full(core.n, 2, dtype=np.int64)
        self.obs_dim = core.width ** 2 + 2

    def observe(self, rows: np.ndarray) -> np.ndarray:
        c = self.core
        extra = np.stack([self.depth[rows] / c.dmax, c.context(rows) / CONTEXT_SCALE], axis=1)
        return np.concatenate([c.frontier(rows, self.depth[rows]), extra], axis=1).astype(np.float32)

    def reset(self, rows: np.ndarray) -> np.ndarray:
        self.core.restart(rows)
        self.depth[rows] = 2
        return self.observe(rows)

    def step(self, actions: np.ndarray):
        c, rows = self.core, np.arange(self.core.n)
        go_on = (actions == 1) & (self.depth < c.dmax)
        self.depth[go_on] += 1
        finish = ~go_on | (self.depth >= c.dmax)
        reward = np.zeros(c.n, dtype=np.float32)
        done = np.zeros(c.n, dtype=bool)
        idx = rows[finish]
        if len(idx):
            size = np.full(len(idx), self.size)
            if self.size_policy is not None:
                size = size_action_to_v(self.size_policy(size_observation(c, idx, self.depth[idx])))
            reward[idx], _, done[idx] = c.finish_cycle(idx, self.depth[idx], size)
            self.depth[idx] = 2
        return reward, done


SIZE_ACTIONS = 12  # LTD: 12 sizes mapping linearly to V in 20..240


def size_action_to_v(action: np.ndarray) -> np.ndarray:
    return 20 * (np.asarray(action) + 1)


def size_observation(core: Core, rows: np.ndarray, depth: np.ndarray) -> np.ndarray:
    extra = np.stack([depth / core.dmax, core.context(rows) / CONTEXT_SCALE], axis=1)
    return np.concatenate([core.tree_scores(rows, depth), extra], axis=1).astype(np.float32)


class LTDSize:
    """LTD's size MDP: once per cycle, pick V from 12 sizes (20..240). Observation: every node
    score of the drafted tree (level by level, padded), D / D_max, context / 4096. The depth is
    uniform in 1..D_max (LTD's initial training) or set by ``depth_policy(rows, core)``."""

    n_actions = SIZE_ACTIONS

    def __init__(self, core: Core, depth_policy=None) -> None:
        self.core, self.depth_policy = core, depth_policy
        self.depth = np.full(core.n, 2, dtype=np.int64)
        self.obs_dim = (core.dmax - 1) * core.width ** 2 + 2

    def _draw_depth(self, rows: np.ndarray) -> None:
        c = self.core
        self.depth[rows] = (c.rng.integers(1, c.dmax + 1, size=len(rows)) if self.depth_policy is None
                            else np.clip(self.depth_policy(rows, c), 1, c.dmax))

    def observe(self, rows: np.ndarray) -> np.ndarray:
        return size_observation(self.core, rows, self.depth[rows])

    def reset(self, rows: np.ndarray) -> np.ndarray:
        self.core.restart(rows)
        self._draw_depth(rows)
        return self.observe(rows)

    def step(self, actions: np.ndarray):
        rows = np.arange(self.core.n)
        reward, _, done = self.core.finish_cycle(rows, self.depth, size_action_to_v(actions))
        self._draw_depth(rows)
        return reward, done


def resps_actions(width: int, depth_max: int) -> np.ndarray:
    """Re-SpS's (total tokens TT, depth d) pairs with TT <= k**(d-1), at the traces' width k.
    (Re-SpS also picks k from {8,12,16,20,32}; a trace holds one width, so k is fixed here.)"""
    pairs = [(tt, d) for tt in (32, 48, 64, 80, 96, 128) for d in range(3, 9)
             if d <= depth_max and tt <= width ** (d - 1)]
    return np.array(pairs, dtype=np.int64)


class ReSpS:
    """Re-SpS's MDP: pick (TT, d), hold it for ``hold`` cycles (10 in training, 30 at
    inference); reward = the mean per-cycle throughput over the interval. Observation: context
    / 4096, the interval's mean accepted length / D_max, its mean reward, the action held."""

    def __init__(self, core: Core, hold: int = 10) -> None:
        self.core, self.hold = core, hold
        self.actions = resps_actions(core.width, core.dmax)
        self.n_actions = len(self.actions)
        self.last = np.zeros((core.n, 4), dtype=np.float32)
        self.obs_dim = 5

    def observe(self, rows: np.ndarray) -> np.ndarray:
        context = self.core.context(rows) / CONTEXT_SCALE
        return np.concatenate([context[:, None], self.last[rows]], axis=1).astype(np.float32)

    def reset(self, rows: np.ndarray) -> np.ndarray:
        self.core.restart(rows)
        self.last[rows] = 0.0
        return self.observe(rows)

    def step(self, actions: np.ndarray):
        c = self.core
        total, depth = self.actions[actions, 0], self.actions[actions, 1]
        reward_sum = np.zeros(c.n, dtype=np.float32)
        accepted_sum = np.zeros(c.n)
        cycles = np.zeros(c.n)
        done = np.zeros(c.n, dtype=bool)
        for _ in range(self.hold):  # `hold` cycles, all copies at once
            live = np.flatnonzero(~done)
            if len(live) == 0:
                break
            reward, accepted, finished = c.finish_cycle(live, depth[live], total[live])
            reward_sum[live] += reward
            accepted_sum[live] += accepted
            cycles[live] += 1
            done[live] = finished
        mean_reward = reward_sum / np.maximum(cycles, 1)
        self.last = np.stack([accepted_sum / np.maximum(cycles, 1) / c.dmax, mean_reward,
                              depth / c.dmax, total / 128.0], axis=1).astype(np.float32)
        return mean_reward.astype(np.float32), done


def radar_dataset(traces: TraceSet, size: int, t_max: int | None = None) -> np.ndarray:
    """RADAR's offline data: for every prefix (trace position) the accepted length after
    t = 1..t_max draft calls, [positions, t_max]. Greedy decoding makes each distribution a
    point mass, so the table holds the value itself."""
    t_max = t_max or traces.depth_max - 1
    calls = np.arange(1, t_max + 1)
    n = traces.positions
    depth = np.tile(calls + 1, n)
    rows = np.repeat(np.arange(n), t_max)
    sizes = np.minimum(size, tree_capacities(depth, traces.width))
    return accepted_at(traces.path_rank, rows, depth, sizes).reshape(n, t_max)


class Radar:
    """RADAR's MDP over one cycle at a random prefix: after draft call t, read the top-k
    confidences of the draft's best path (probabilities of the best node's children) and t /
    t_max; CONTINUE (1) costs ``alpha``; STOP (0) or t_max ends the cycle with reward
    l_acc / T_gen(t), T_gen(t) = T0 + Tf t + T_policy (t + 1), from the cost model."""

    n_actions = 2

    def __init__(self, core: Core, size: int = 60, alpha: float = 0.01, policy_seconds: float = 0.0) -> None:
        self.core, self.alpha = core, alpha
        self.t_max = core.dmax - 1
        self.table = radar_dataset(core.traces, size, self.t_max)
        context = float(np.median(core.traces.context_length))
        self.t0 = float(core.cost.verify(size, context))
        self.tf = float(core.cost.draft(core.width, context))
        self.tp = policy_seconds
        self.calls = np.ones(core.n, dtype=np.int64)
        self.where = np.zeros(core.n, dtype=np.int64)
        self.obs_dim = core.width + 1

    def observe(self, rows: np.ndarray) -> np.ndarray:
        conf = np.exp(self.core.traces.best_child_logprobs[self.where[rows], self.calls[rows] - 1].astype(np.float32))
        return np.concatenate([conf, (self.calls[rows] / self.t_max)[:, None]], axis=1).astype(np.float32)

    def reset(self, rows: np.ndarray) -> np.ndarray:
        self.where[rows] = self.core.rng.integers(0, self.core.traces.positions, size=len(rows))
        self.calls[rows] = 1
        return self.observe(rows)

    def step(self, actions: np.ndarray):
        go_on = (actions == 1) & (self.calls < self.t_max)
        reward = np.where(go_on, -self.alpha, 0.0).astype(np.float32)
        stop = ~go_on
        t = self.calls[stop]
        accepted = self.table[self.where[stop], t - 1]
        t_gen = self.t0 + self.tf * t + self.tp * (t + 1)
        reward[stop] = (accepted + 1) / t_gen * self.core.reward_scale
        self.calls[go_on] += 1
        return reward, stop


class ChainWindow:
    """Seed 003's window MDP: each cycle pick γ (draft steps, 1..D_max-1) seeing the recent
    per-step acceptance rate and the context; reward = the cycle's throughput."""

    def __init__(self, core: Core, size: int = 60, history: int = 8) -> None:
        self.core, self.size, self.history = core, size, history
        self.n_actions = core.dmax - 1
        self.accepted = np.zeros((core.n, history))
        self.trials = np.zeros((core.n, history))
        self.slot = np.zeros(core.n, dtype=np.int64)
        self.obs_dim = 2

    def observe(self, rows: np.ndarray) -> np.ndarray:
        trials = self.trials[rows].sum(1)
        rate = np.where(trials > 0, self.accepted[rows].sum(1) / np.maximum(trials, 1), 0.0)
        return np.stack([rate, self.core.context(rows) / CONTEXT_SCALE], axis=1).astype(np.float32)

    def reset(self, rows: np.ndarray) -> np.ndarray:
        self.core.restart(rows)
        self.accepted[rows] = 0.0
        self.trials[rows] = 0.0
        return self.observe(rows)

    def step(self, actions: np.ndarray):
        rows = np.arange(self.core.n)
        depth = np.asarray(actions) + 2
        reward, accepted, done = self.core.finish_cycle(rows, depth, np.full(self.core.n, self.size))
        slot = self.slot % self.history
        self.accepted[rows, slot] = accepted
        self.trials[rows, slot] = np.minimum(accepted + 1, depth - 1)
        self.slot += 1
        return reward, done


MDPS = {"ltd-depth": LTDDepth, "ltd-size": LTDSize, "resps": ReSpS, "radar": Radar, "chain-window": ChainWindow}


def make_mdp(name: str, traces: TraceSet, cost: CostModel, n: int, seed: int = 0,
             max_new_tokens: int | None = None, **kwargs):
    return MDPS[name](Core(traces, cost, n, max_new_tokens, seed), **kwargs)


def spaces(mdp) -> tuple[gym.Space, gym.Space]:
    bound = np.full(mdp.obs_dim, np.float32(1e3))
    return (gym.spaces.Box(-bound, bound, dtype=np.float32), gym.spaces.Discrete(mdp.n_actions))


class SimEnv(gym.Env):
    """One copy of an MDP as a plain Gymnasium environment."""

    metadata = {"render_modes": []}

    def __init__(self, name: str, traces: TraceSet, cost: CostModel, seed: int = 0,
                 max_new_tokens: int | None = None, **kwargs) -> None:
        self.mdp = make_mdp(name, traces, cost, 1, seed, max_new_tokens, **kwargs)
        self.observation_space, self.action_space = spaces(self.mdp)
        self._row = np.zeros(1, dtype=np.int64)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self.mdp.core.seed(seed)
        return self.mdp.reset(self._row)[0], {}

    def step(self, action):
        reward, done = self.mdp.step(np.array([int(action)]))
        return self.mdp.observe(self._row)[0], float(reward[0]), bool(done[0]), False, {}
