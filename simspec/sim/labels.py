"""Training examples for the acceptance classifiers of ``simspec.policies.stopping``: one per
(position, drafted level j), with the stopping rule's features after level j and, as label,
whether the target accepts the level-j token given the levels above (greedy: 0/1; T > 0:
P(accepted >= j) / P(accepted >= j - 1), weighted by P(accepted >= j - 1)).

C2T's and the Bayes rule's node classifiers learn from ``node_examples``: the best nodes of full
trees, labelled by whether they lie on the greedy path (T > 0: the walk's reach probability), so
that the verified nodes' labels sum to the cycle's expected accepted length."""

from __future__ import annotations

import numpy as np

from simspec.policies.rules.c2t import node_features
from simspec.policies.stopping import AcceptancePredictor, step_features
from simspec.sim.traces import TraceSet, accepted_at


def acceptance_examples(traces: TraceSet, size: int, max_examples: int = 60_000, seed: int = 0
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(features, labels, weights) over every position and level, zero weights dropped, at most ``max_examples``."""
    rows = np.arange(traces.positions)
    size = min(size, traces.nodes)
    xs, ys, ws = [], [], []
    for j in range(1, traces.depth_max):
        depth = np.full(len(rows), j + 1)
        if traces.sampled:
            tail = traces._tail(rows, depth, np.full(len(rows), size)).astype(np.float64)
            reach, accept = tail[:, j - 1], tail[:, j]
        else:
            accepted = accepted_at(traces.path_rank, rows, depth, np.full(len(rows), size))
            reach, accept = (accepted >= j - 1).astype(np.float64), (accepted >= j).astype(np.float64)
        keep = reach > 0
        previous = traces.level_scores[rows, j - 2, 0].astype(np.float32) if j > 1 else np.zeros(len(rows))
        features = step_features(traces.level_scores[rows, j - 1].astype(np.float32), depth, previous, traces.depth_max)
        xs.append(features[keep])
        ys.append(accept[keep] / reach[keep])
        ws.append(reach[keep])
    x, y, w = np.concatenate(xs), np.clip(np.concatenate(ys), 0, 1), np.concatenate(ws)
    if len(x) > max_examples:
        chosen = np.random.default_rng(seed).choice(len(x), max_examples, replace=False)
        x, y, w = x[chosen], y[chosen], w[chosen]
    return x, y, w


def fit_predictor(traces: TraceSet, size: int, seed: int = 0) -> AcceptancePredictor:
    """The acceptance classifier of the stopping baselines, trained on ``traces``."""
    return AcceptancePredictor.fit(*acceptance_examples(traces, size, seed=seed), seed=seed)


def path_by_rank(traces: TraceSet, rows: np.ndarray, n: int) -> np.ndarray:
    """``[rows, n]``: 1 where the node of that rank (the engine's order over every non-root node
    of the full tree) lies on the target's greedy path, for the ``n`` best ranks."""
    out = np.zeros((len(rows), n))
    ranks = traces.path_rank[rows, :, traces.depth_max - 2].astype(np.int64)
    for j in range(ranks.shape[1]):
        hit = ranks[:, j] < n
        out[np.flatnonzero(hit), ranks[hit, j]] = 1.0
    return out


def reach_by_slot(traces: TraceSet, rows: np.ndarray) -> np.ndarray:
    """``[rows, levels, slots]`` as ``level_scores``: each recorded node's reach probability at its
    level and rank within it, NaN past them (not by global order: float16 ties across levels would
    swap nodes)."""
    from simspec.sim.stochastic import reach_probabilities

    n = traces.nodes
    depth = traces.node_depth[rows, :n].astype(np.int64)
    reach = reach_probabilities(traces.node_parent[rows, :n], traces.node_prob[rows, :n])
    levels = traces.level_scores.shape[1:]
    one_hot = depth[:, :, None] == np.arange(1, levels[0] + 1)[None, None, :]
    rank = np.take_along_axis(np.cumsum(one_hot, axis=1) - 1, np.clip(depth - 1, 0, None)[:, :, None], 2)[..., 0]
    out = np.full((len(rows), *levels), np.nan)
    line, node = np.nonzero((depth >= 1) & (rank < levels[1]))
    out[line, depth[line, node] - 1, rank[line, node]] = reach[line, node]
    return out


def node_examples(traces: TraceSet, positions: int = 3000, top: int = 64, max_examples: int = 60_000,
                  seed: int | np.random.Generator = 0, rows: np.ndarray | None = None, extra: np.ndarray | None = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(features, labels, weights) for C2T and the Bayes rule: the ``top`` best nodes of the full tree
    at up to ``positions`` random positions (or ``rows``), labelled as the module says. ``extra``
    (``[rows, k]``) joins each row's own features to every node's; ``seed`` may be a generator."""
    rng = np.random.default_rng(seed)
    if rows is None:
        rows = np.sort(rng.choice(traces.positions, min(positions, traces.positions), replace=False))
    scores = traces.level_scores[rows].astype(np.float32)
    features, valid = node_features(scores, traces.depth_max)
    if extra is not None:
        features = np.concatenate([features, np.broadcast_to(extra[:, None, :], (*valid.shape, extra.shape[1]))], 2)
    flat = np.where(valid, scores.reshape(len(rows), -1), -np.inf)
    order = np.argsort(-flat, axis=1, kind="stable")[:, :top]
    line = np.arange(len(rows))[:, None]
    kept = valid[line, order]
    if traces.sampled:
        labels = reach_by_slot(traces, rows).reshape(len(rows), -1)[line, order]
        kept &= np.isfinite(labels)
    else:
        labels = path_by_rank(traces, rows, order.shape[1])
    x, y = features[line, order][kept], labels[kept]
    if len(x) > max_examples:
        chosen = rng.choice(len(x), max_examples, replace=False)
        x, y = x[chosen], y[chosen]
    return x, y, np.ones(len(y))


def fit_node_predictor(traces: TraceSet, top: int = 64, seed: int = 0) -> AcceptancePredictor:
    """C2T's node classifier, trained on ``traces``; the Bayes rule's on the best ``WHOLE_TREE`` nodes
    (its expected tokens sum every verified node's probability: calibrated past the best 64 too)."""
    return AcceptancePredictor.fit(*node_examples(traces, top=top, seed=seed), seed=seed)


WHOLE_TREE = 256
