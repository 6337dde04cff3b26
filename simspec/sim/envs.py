"""Gymnasium environments for the seeds' MDPs, on recorded traces and a cost model.

Each MDP is a batched core stepping ``n`` copies in numpy (``simspec.sim.mdp.BatchedMDP``);
``SimEnv`` wraps one copy as a ``gymnasium.Env``, ``simspec.train.vecenv.SimVecEnv`` all of them
as an SB3 ``VecEnv`` (apart, because SB3 imports torch).

An episode is one decision unit: a cycle (LTD, the chain window, RADAR) or one held interval
(Re-SpS). A copy's prompt carries on across episodes, a new one drawn once it is decoded to its
budget: prompt-long episodes would sum per-cycle throughputs, which pays a policy to cut every
cycle short (LTD optimises "the throughput of each draft-and-verify cycle").

Rewards (``reward=``) are per cycle, in units of greedy decoding at the median context (O(1)
on any hardware): ``throughput`` (LTD's) is (accepted + 1) / cycle seconds over greedy's
tokens per second; ``acceptance`` is accepted + 1 (the proxy LTD argues against); ``time`` is
(accepted + 1) - cycle seconds / greedy seconds per token, the saving in greedy tokens.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from simspec.policies.base import tree_capacities
from simspec.policies.features import (
    CONTEXT_SCALE,
    RESPS_FEATURES,
    depth_features,
    radar_features,
    resps_features,
    size_feature_dim,
    size_features,
)
from simspec.registry import Registry
from simspec.sim.costmodel import CostModel
from simspec.sim.mdp import BatchedMDP
from simspec.sim.replay import positions_limit
from simspec.sim.traces import TraceSet

REWARDS = ("throughput", "acceptance", "time")


def cycle_reward(kind: str, accepted, seconds, greedy_seconds: float) -> np.ndarray:
    """A cycle's reward of the given kind (module docstring); ``greedy_seconds``: greedy's per token."""
    tokens = np.asarray(accepted) + 1.0
    if kind == "throughput":
        return (tokens / seconds * greedy_seconds).astype(np.float32)
    if kind == "acceptance":
        return tokens.astype(np.float32)
    return (tokens - seconds / greedy_seconds).astype(np.float32)


def greedy_token_seconds(traces: TraceSet, cost: CostModel) -> float:
    """Plain decoding's seconds per token at the traces' median context: the rewards' unit."""
    return float(cost.greedy(np.median(traces.context_length)))


class Core:
    """Shared state: which prompt each copy decodes and where its root is."""

    def __init__(self, traces: TraceSet, cost: CostModel, n: int, max_new_tokens: int | None, seed: int,
                 reward: str = "throughput") -> None:
        if reward not in REWARDS:
            raise ValueError(f"unknown reward {reward!r}: choose from {', '.join(REWARDS)}")
        self.traces, self.cost, self.n, self.reward = traces, cost, n, reward
        self.width, self.dmax = traces.width, traces.depth_max
        self.limit_of = positions_limit(traces, max_new_tokens)
        self.prompts = np.flatnonzero(self.limit_of > 0)
        if len(self.prompts) == 0:
            raise ValueError("no trace prompt has a position to decode")
        self.rng = np.random.default_rng(seed)
        self.prompt = np.zeros(n, dtype=np.int64)
        self.prompt_over = np.ones(n, dtype=bool)  # the copy needs a new prompt at its next reset
        self.position, self.previous = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        self.reward_scale = greedy_token_seconds(traces, cost)

    def seed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def restart(self, rows: np.ndarray) -> np.ndarray:
        """A new episode for the rows: those whose prompt is over get a new one (returned)."""
        fresh = rows[self.prompt_over[rows]]
        self.prompt[fresh] = self.rng.choice(self.prompts, size=len(fresh))
        self.position[fresh] = self.previous[fresh] = 0
        self.prompt_over[fresh] = False
        return fresh

    def at(self, rows: np.ndarray) -> np.ndarray:
        # A finished copy still gets a (last-position) observation before it restarts.
        last = self.limit_of[self.prompt[rows]] - 1
        return self.traces.prompt_offsets[self.prompt[rows]] + np.minimum(self.position[rows], last)

    def context(self, rows: np.ndarray) -> np.ndarray:
        return self.traces.context_length[self.at(rows)]

    def finish_cycle(self, rows: np.ndarray, depth: np.ndarray, size: np.ndarray, children: np.ndarray | None = None
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Verify the rows' trees (``children``: each node keeps its best k, Re-SpS's top-k); returns
        (reward, accepted, prompt over) and advances the roots."""
        at = self.at(rows)
        size = np.clip(size, 1, tree_capacities(depth, self.width))
        size = np.minimum(size, self.traces.nodes)
        size, accepted = self.traces.verify(at, depth, size, self.rng, children)
        seconds = self.cost.cycle(depth, self.width, size, self.traces.context_length[at], self.previous[rows] + 1)
        reward = self.reward_of(accepted, seconds)
        self.position[rows] += accepted + 1
        self.previous[rows] = accepted
        done = self.position[rows] >= self.limit_of[self.prompt[rows]]
        self.prompt_over[rows] |= done
        return reward.astype(np.float32), accepted, done

    def reward_of(self, accepted: np.ndarray, seconds: np.ndarray) -> np.ndarray:
        return cycle_reward(self.reward, accepted, seconds, self.reward_scale)

    def frontier(self, rows: np.ndarray, depth: np.ndarray) -> np.ndarray:
        """Scores of the newest level of a ``depth``-level tree, [rows, W**2]."""
        return self.traces.level_scores[self.at(rows), depth - 2].astype(np.float32)

    def level_scores(self, rows: np.ndarray) -> np.ndarray:
        """All levels' scores at the rows' roots, [rows, D_max - 1, W**2]."""
        return self.traces.level_scores[self.at(rows)].astype(np.float32)


class LTDDepth:
    """LTD's depth MDP: after every draft step, CONTINUE (1) or STOP (0), seeing ``depth_features``; the
    cycle's reward at STOP (or D_max). V is fixed (LTD: 60) or ``size_policy(size features)`` (co-adaptation)."""

    n_actions = 2

    def __init__(self, core: Core, size: int = 60, size_policy=None) -> None:
        self.core, self.size, self.size_policy = core, size, size_policy
        self.depth = np.full(core.n, 2, dtype=np.int64)
        self.obs_dim = core.width ** 2 + 2

    def observe(self, rows: np.ndarray) -> np.ndarray:
        c = self.core
        return depth_features(c.frontier(rows, self.depth[rows]), self.depth[rows], c.context(rows), c.dmax)

    def reset(self, rows: np.ndarray) -> np.ndarray:
        self.core.restart(rows)
        self.depth[rows] = 2
        return self.observe(rows)

    def step(self, actions: np.ndarray):
        c = self.core
        go_on = (actions == 1) & (self.depth < c.dmax)
        self.depth[go_on] += 1
        reward = np.zeros(c.n, dtype=np.float32)
        done = ~go_on | (self.depth >= c.dmax)
        idx = np.flatnonzero(done)
        if len(idx):
            size = np.full(len(idx), self.size)
            if self.size_policy is not None:
                size = self.size_policy(size_observation(c, idx, self.depth[idx]))
            reward[idx] = c.finish_cycle(idx, self.depth[idx], size)[0]
            self.depth[idx] = 2
        return reward, done


def ltd_sizes(step: int = 20, count: int = 12) -> np.ndarray:
    """LTD's size actions: ``count`` sizes mapping linearly to V = step, 2 step, ... (20..240)."""
    return step * np.arange(1, count + 1)


def size_observation(core: Core, rows: np.ndarray, depth: np.ndarray) -> np.ndarray:
    return size_features(core.level_scores(rows), depth, core.context(rows), core.dmax, core.width)


class LTDSize:
    """LTD's size MDP: once per cycle, pick V from ``sizes`` seeing ``size_features``. The depth is
    uniform in 1..D_max (LTD's initial training) or ``depth_policy(rows, core)`` (co-adaptation)."""

    def __init__(self, core: Core, sizes=None, depth_policy=None) -> None:
        self.core, self.depth_policy = core, depth_policy
        self.sizes = ltd_sizes() if sizes is None else np.asarray(sizes, dtype=np.int64)
        self.n_actions = len(self.sizes)
        self.depth = np.full(core.n, 2, dtype=np.int64)
        self.obs_dim = size_feature_dim(core.width, core.dmax)

    def observe(self, rows: np.ndarray) -> np.ndarray:
        return size_observation(self.core, rows, self.depth[rows])

    def reset(self, rows: np.ndarray) -> np.ndarray:
        c = self.core
        c.restart(rows)
        self.depth[rows] = (c.rng.integers(1, c.dmax + 1, size=len(rows)) if self.depth_policy is None
                            else np.clip(self.depth_policy(rows, c), 1, c.dmax))
        return self.observe(rows)

    def step(self, actions: np.ndarray):
        rows = np.arange(self.core.n)
        reward = self.core.finish_cycle(rows, self.depth, self.sizes[actions])[0]
        return reward, np.ones(self.core.n, dtype=bool)  # one cycle, one episode


RESPS_CHILDREN = (2, 4, 6)  # top-k choices below the traces' width (Re-SpS: 8-32 at EAGLE-2's 10)


def resps_actions(width: int, depth_max: int, children: bool = False, nodes: int | None = None) -> np.ndarray:
    """Re-SpS's (total tokens TT, depth d) pairs with TT <= W**(d-1), W the traces' width; with
    ``children``, (TT, d, k) triples, k each node's children kept (``RESPS_CHILDREN`` and W: the
    paper's top-k, here within the recorded trees), TT <= k**(d-1) and at most ``nodes``, the most
    the traces verify (a larger TT would verify the same trees)."""
    ks = sorted({*(k for k in RESPS_CHILDREN if k < width), width}) if children else [width]
    totals = [tt for tt in (32, 48, 64, 80, 96, 128) if not children or nodes is None or tt <= max(nodes, 32)]
    rows = [(tt, d, k) for k in ks for tt in totals for d in range(3, 9) if d <= depth_max and tt <= k ** (d - 1)]
    return np.array(rows, dtype=np.int64).reshape(-1, 3)[:, :3 if children else 2]


class ReSpS:
    """Re-SpS's MDP: pick (TT, d) (or (TT, d, k): ``resps_actions``), hold it ``hold`` cycles (or to
    the prompt's end) for the mean per-cycle reward, seeing ``resps_features`` of the last interval
    (zeros at a prompt's start)."""

    def __init__(self, core: Core, hold: int = 10, children: bool = False) -> None:
        self.core, self.hold = core, hold
        self.actions = resps_actions(core.width, core.dmax, children, core.traces.nodes)
        self.n_actions = len(self.actions)
        self.last = np.zeros((core.n, self.actions.shape[1] + 1))  # mean accepted, then the action held
        self.obs_dim = RESPS_FEATURES + (self.actions.shape[1] == 3)

    def observe(self, rows: np.ndarray) -> np.ndarray:
        return resps_features(self.core.context(rows), self.last[rows], self.core.dmax, self.core.width)

    def reset(self, rows: np.ndarray) -> np.ndarray:
        self.last[self.core.restart(rows)] = 0.0
        return self.observe(rows)

    def step(self, actions: np.ndarray):
        c = self.core
        held = self.actions[actions]
        total, depth = held[:, 0], held[:, 1]
        children = held[:, 2] if held.shape[1] == 3 else None
        reward_sum = np.zeros(c.n, dtype=np.float32)
        accepted_sum, cycles = np.zeros(c.n), np.zeros(c.n)
        done = np.zeros(c.n, dtype=bool)
        for _ in range(self.hold):  # `hold` cycles, all copies at once
            live = np.flatnonzero(~done)
            if len(live) == 0:
                break
            reward, accepted, finished = c.finish_cycle(live, depth[live], total[live],
                                                        None if children is None else children[live])
            reward_sum[live] += reward
            accepted_sum[live] += accepted
            cycles[live] += 1
            done[live] = finished
        self.last = np.concatenate([(accepted_sum / np.maximum(cycles, 1))[:, None], held], axis=1)
        return (reward_sum / np.maximum(cycles, 1)).astype(np.float32), np.ones(c.n, dtype=bool)


def radar_dataset(traces: TraceSet, size: int, t_max: int | None = None, rows: np.ndarray | None = None,
                  rng: np.random.Generator | None = None) -> np.ndarray:
    """RADAR's offline data: per trace position (or at ``rows``), the accepted length after t =
    1..t_max draft calls, [positions, t_max]. At T > 0 its expectation (RADAR's Eqs. 8-10), or with
    ``rng`` one draw from each tree's acceptance-length law (the paper's offline data are such
    draws); every reward here is linear in it, so both give the same expected return."""
    t_max = t_max or traces.depth_max - 1
    calls = np.arange(1, t_max + 1)
    where = np.arange(traces.positions) if rows is None else np.asarray(rows)
    depth = np.tile(calls + 1, len(where))
    at = np.repeat(where, t_max)
    sizes = np.minimum(np.minimum(size, tree_capacities(depth, traces.width)), traces.nodes)
    if rng is not None and traces.sampled:
        return traces.accepted(at, depth, sizes, rng).reshape(len(where), t_max).astype(float)
    return traces.expected_accepted(at, depth, sizes).reshape(len(where), t_max)


def radar_observations(traces: TraceSet, where: np.ndarray, calls: np.ndarray) -> np.ndarray:
    """``radar_features`` after draft call ``calls`` (1-based) of the trees at positions ``where``."""
    frontier = traces.level_scores[where, calls - 1].astype(np.float32)
    above = traces.level_scores[where, np.maximum(calls - 2, 0), 0].astype(np.float32)
    previous_best = np.where(calls > 1, above, 0.0)  # call 1 extends the root, whose score is 0
    return radar_features(frontier, previous_best, calls, traces.depth_max - 1, traces.width)


def radar_cost(traces: TraceSet, cost: CostModel, size: int, policy_seconds: float) -> tuple[float, float, float]:
    """RADAR's T_gen(t) = T0 + Tf t + T_policy (t + 1): (T0, Tf, T_policy) at the median context."""
    context = float(np.median(traces.context_length))
    return float(cost.verify(size, context)), float(cost.draft(traces.width, context)), policy_seconds


class Radar:
    """RADAR's MDP, one cycle at a random prefix: CONTINUE (1) costs ``alpha``; STOP (0) or t_max
    earns the reward of l_acc tokens in T_gen(t) (``radar_cost``)."""

    n_actions = 2

    def __init__(self, core: Core, size: int = 60, alpha: float = 0.01, policy_seconds: float = 0.0) -> None:
        self.core, self.alpha = core, alpha
        self.t_max = core.dmax - 1
        self.table = radar_dataset(core.traces, size, self.t_max)
        self.t0, self.tf, self.tp = radar_cost(core.traces, core.cost, size, policy_seconds)
        self.calls = np.ones(core.n, dtype=np.int64)
        self.where = np.zeros(core.n, dtype=np.int64)
        self.obs_dim = core.width + 1

    def observe(self, rows: np.ndarray) -> np.ndarray:
        return radar_observations(self.core.traces, self.where[rows], self.calls[rows])

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
        reward[stop] = self.core.reward_of(accepted, self.t0 + self.tf * t + self.tp * (t + 1))
        self.calls[go_on] += 1
        return reward, stop


class ChainWindow:
    """Seed 003's window MDP: each cycle pick γ in 1..D_max-1 seeing the acceptance rate of the
    prompt's last ``history`` cycles and the context."""

    def __init__(self, core: Core, size: int = 60, history: int = 8) -> None:
        self.core, self.size, self.history = core, size, history
        self.n_actions = core.dmax - 1
        self.accepted, self.trials = np.zeros((core.n, history)), np.zeros((core.n, history))
        self.slot = np.zeros(core.n, dtype=np.int64)
        self.obs_dim = 2

    def observe(self, rows: np.ndarray) -> np.ndarray:
        trials = self.trials[rows].sum(1)
        rate = np.where(trials > 0, self.accepted[rows].sum(1) / np.maximum(trials, 1), 0.0)
        return np.stack([rate, self.core.context(rows) / CONTEXT_SCALE], axis=1).astype(np.float32)

    def reset(self, rows: np.ndarray) -> np.ndarray:
        fresh = self.core.restart(rows)
        self.accepted[fresh] = self.trials[fresh] = 0.0
        return self.observe(rows)

    def step(self, actions: np.ndarray):
        rows = np.arange(self.core.n)
        depth = np.asarray(actions) + 2
        reward, accepted, _ = self.core.finish_cycle(rows, depth, np.full(self.core.n, self.size))
        slot = self.slot % self.history
        self.accepted[rows, slot] = accepted
        self.trials[rows, slot] = np.minimum(accepted + 1, depth - 1)
        self.slot += 1
        return reward, np.ones(self.core.n, dtype=bool)  # one cycle, one episode


# The MDPs by name; a new one registers from any module (``register_mdp``).
MDPS: Registry[type] = Registry("MDP", ("simspec.sim.envs",))


def register_mdp(name: str, mdp: type) -> type:
    """Registers ``mdp`` (a ``BatchedMDP`` built from a ``Core`` and keyword options) as ``name``."""
    return MDPS.add(name, mdp)


for _name, _mdp in {"ltd-depth": LTDDepth, "ltd-size": LTDSize, "resps": ReSpS, "radar": Radar,
                    "chain-window": ChainWindow}.items():
    register_mdp(_name, _mdp)


def make_mdp(name: str, traces: TraceSet, cost: CostModel, n: int, seed: int = 0,
             max_new_tokens: int | None = None, reward: str = "throughput", **kwargs) -> BatchedMDP:
    return MDPS.get(name)(Core(traces, cost, n, max_new_tokens, seed, reward), **kwargs)


def spaces(mdp: BatchedMDP) -> tuple[gym.Space, gym.Space]:
    bound = np.full(mdp.obs_dim, np.float32(1e3))
    return (gym.spaces.Box(-bound, bound, dtype=np.float32), gym.spaces.Discrete(mdp.n_actions))


class SimEnv(gym.Env):
    """One copy of an MDP as a Gymnasium env; a seeded ``reset`` also starts a new prompt (reproducibly)."""

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
            self.mdp.core.prompt_over[self._row] = True
        return self.mdp.reset(self._row)[0], {}

    def step(self, action):
        reward, done = self.mdp.step(np.array([int(action)]))
        return self.mdp.observe(self._row)[0], float(reward[0]), bool(done[0]), False, {}
