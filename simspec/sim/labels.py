"""Training examples for the acceptance classifiers of ``simspec.policies.stopping``, read off
traces: one example per (position, drafted level j), with the features the stopping rule sees
after drafting level j and, as label, whether the target accepts the path's level-j token given
it accepted the levels above (a tree of j + 1 levels verified at ``size`` nodes). Greedy traces
give 0/1 labels; traces recorded at T > 0 give the exact conditional probability
P(accepted >= j) / P(accepted >= j - 1), weighted by P(accepted >= j - 1)."""

from __future__ import annotations

import numpy as np

from simspec.policies.stopping import AcceptancePredictor, step_features
from simspec.sim.traces import TraceSet, accepted_at


def acceptance_examples(traces: TraceSet, size: int, max_examples: int = 60_000, seed: int = 0
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(features, labels, weights) over every position and level, examples of zero weight
    (the path was rejected above) dropped, at most ``max_examples`` drawn at random."""
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
        features = step_features(traces.level_scores[rows, j - 1].astype(np.float32), depth, previous,
                                 traces.depth_max)
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
