"""Research, read by ``information-bound.py`` (not the package): the information bound, how much of
the hindsight oracle's gain a policy can reach from what it observes when it decides (numpy only).

``oracle_cycles`` follows the oracle's choices forward on the train split; imitation fits two
classifiers on what a policy sees at the engine's decision points in those cycles: after each
draft step, *continue* iff the oracle drafted deeper (``step_features``, the previous cycle's
accepted drafts, the context length); once drafted, each node *verified* iff the oracle's V keeps
it (C2T's ``node_features``). What the imitating policy reaches in replay is what those
observations carry for this learner (one tanh layer): a lower bound on the bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simspec.errors import SimspecError
from simspec.policies.base import BatchPolicy, tree_capacity
from simspec.policies.rules.c2t import N_NODE_FEATURES, node_features
from simspec.policies.stopping import AcceptancePredictor, step_features
from simspec.sim.costmodel import CostModel
from simspec.sim.oracle import oracle
from simspec.sim.replay import positions_limit
from simspec.sim.traces import TraceSet, accepted_at


@dataclass
class OracleCycles:
    """The oracle's cycles, one entry each: the root position, tokens the last cycle committed,
    the (D, V) chosen, the drafts accepted; ``seconds`` the oracle's time per prompt."""

    at: np.ndarray
    committed: np.ndarray
    depth: np.ndarray
    size: np.ndarray
    accepted: np.ndarray
    seconds: np.ndarray


def oracle_cycles(traces: TraceSet, cost: CostModel, max_new_tokens: int | None = None) -> OracleCycles:
    if traces.sampled:
        raise SimspecError("the information bound follows the oracle's cycles on greedy traces (temperature 0)")
    result = oracle(traces, cost, max_new_tokens, choices=True)
    limit = positions_limit(traces, max_new_tokens)
    rows = []
    for i in range(traces.n_prompts):
        p, c = 0, 1
        while p < limit[i]:
            depth, size = result.options[result.choice[i, p, c - 1]]
            at = int(traces.prompt_offsets[i]) + p
            a = int(accepted_at(traces.path_rank, np.array([at]), np.array([depth]), np.array([size]))[0])
            rows.append((at, c, depth, size, a))
            p, c = p + a + 1, a + 1
    at, committed, depth, size, accepted = (np.array(col, dtype=np.int64) for col in zip(*rows))
    return OracleCycles(at, committed, depth, size, accepted, result.seconds)


def _stop_features(frontier: np.ndarray, depth: np.ndarray, previous_top: np.ndarray, previous: np.ndarray,
                   context: np.ndarray, depth_max: int) -> np.ndarray:
    return np.concatenate([step_features(frontier, depth, previous_top, depth_max),
                           (np.asarray(previous, float) / depth_max)[:, None],
                           np.log1p(np.asarray(context, float))[:, None] / 8], axis=1)


def imitation_examples(traces: TraceSet, cycles: OracleCycles) -> tuple[tuple, tuple]:
    """((stop features, continue labels), (node features, verified labels)) from the oracle's cycles."""
    dmax, levels = traces.depth_max, traces.depth_max - 1
    scores = traces.level_scores[cycles.at].astype(np.float32)  # [cycles, levels, W**2]
    context = traces.context_length[cycles.at]
    xs, ys = [], []
    for j in range(2, dmax):  # the engine asks after drafting j levels (root included), while j < the plan
        asked = cycles.depth >= j
        if not asked.any():
            continue
        idx = np.flatnonzero(asked)
        previous_top = scores[idx, j - 3, 0] if j > 2 else np.zeros(len(idx))
        xs.append(_stop_features(scores[idx, j - 2], np.full(len(idx), j), previous_top,
                                 cycles.committed[idx] - 1, context[idx], dmax))
        ys.append((cycles.depth[idx] > j).astype(float))
    drafted = cycles.depth >= 2
    tree = scores[drafted].copy()
    tree[np.arange(levels)[None, :] >= (cycles.depth[drafted] - 1)[:, None]] = -np.inf  # levels not drafted
    features, valid = node_features(tree, dmax)
    flat = np.where(valid, tree.reshape(len(tree), -1), -np.inf)
    order = np.argsort(-flat, axis=1, kind="stable")  # the engine's order: best score, ties to the shallower
    rank = np.empty_like(order)
    rank[np.arange(len(order))[:, None], order] = np.arange(order.shape[1])[None, :]
    kept = rank < (cycles.size[drafted] - 1)[:, None]
    return ((np.concatenate(xs), np.concatenate(ys)), (features[valid], kept[valid].astype(float)))


class Imitation(BatchPolicy):
    """The oracle's choices as a policy: a stop classifier and a node classifier (see the module)."""

    def __init__(self, stop: AcceptancePredictor, nodes: AcceptancePredictor, width: int, depth_max: int,
                 thresholds: tuple[float, float] = (0.5, 0.5)) -> None:
        self.stop, self.nodes, self.width, self.depth_max = stop, nodes, width, depth_max
        self.thresholds = thresholds
        self.name = f"oracle-imitation(stop {thresholds[0]:g}, keep {thresholds[1]:g})"

    def reset_batch(self, n):
        self.previous, self.previous_top, self.context = np.zeros(n), np.zeros(n), np.zeros(n)

    def plan_batch(self, rows, context):
        self.previous_top[rows], self.context[rows] = 0.0, context
        return np.full(len(rows), self.depth_max), np.full(len(rows), tree_capacity(self.depth_max, self.width))

    def keep_drafting_batch(self, rows, depth, frontier, planned):
        frontier = np.asarray(frontier, np.float32)
        p = self.stop.predict(_stop_features(frontier, depth, self.previous_top[rows], self.previous[rows],
                                             self.context[rows], self.depth_max))
        self.previous_top[rows] = frontier[:, 0]
        return (p >= self.thresholds[0]) & (depth < planned)

    def choose_size_batch(self, rows, depth, tree_scores, planned):
        features, valid = node_features(tree_scores, self.depth_max)
        p = self.nodes.predict(features.reshape(-1, N_NODE_FEATURES)).reshape(valid.shape)
        return np.minimum(1 + ((p >= self.thresholds[1]) & valid).sum(axis=1), planned)

    def observe_batch(self, rows, depth, size, accepted, **_):
        self.previous[rows] = accepted


THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7)


def fit_imitation(traces: TraceSet, cost: CostModel, max_new_tokens: int | None = None, max_examples: int = 60_000,
                  seed: int = 0) -> Imitation:
    """The imitating policy, fitted on ``traces``; its two thresholds are tuned by replay on them, as
    the rules' are (0.5 is not where throughput is best when the oracle's choice is a coin flip)."""
    from simspec.sim.replay import replay

    (xs, ys), (xn, yn) = imitation_examples(traces, oracle_cycles(traces, cost, max_new_tokens))
    rng = np.random.default_rng(seed)

    def fit(x, y):
        if len(x) > max_examples:
            keep = rng.choice(len(x), max_examples, replace=False)
            x, y = x[keep], y[keep]
        return AcceptancePredictor.fit(x, y, np.ones(len(y)), seed=seed)

    stop, nodes = fit(xs, ys), fit(xn, yn)
    candidates = [Imitation(stop, nodes, traces.width, traces.depth_max, (a, b))
                  for a in THRESHOLDS for b in THRESHOLDS]
    return max(candidates, key=lambda p: float(np.mean(replay(traces, cost, p, max_new_tokens).speedup)))
