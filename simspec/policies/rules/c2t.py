"""C2T (Huo et al., 2025) as a baseline (numpy only): the tree is drafted to the grid-best depth,
then a classifier (``AcceptancePredictor``, trained on the train split's greedy paths) reads each
node's joint log-prob, depth, gap to its level's best and its level's entropy (the paper also reads
the parent's entropy, which traces do not store). The engines verify the best V nodes by score,
V - 1 the nodes kept at a tuned threshold, so the pruned tree stays a tree.
"""

from __future__ import annotations

import numpy as np

from simspec.policies.base import BatchPolicy, tree_capacity
from simspec.policies.registry import RuleContext, register_baseline

N_NODE_FEATURES = 4
_FLOOR = -20.0  # log-prob floor for padded (-inf) candidates


def node_features(tree_scores: np.ndarray, depth_max: int) -> tuple[np.ndarray, np.ndarray]:
    """Features ``[rows, levels * W**2, N_NODE_FEATURES]`` per node of ``[rows, levels, W**2]`` trees,
    and which entries are nodes."""
    scores = np.asarray(tree_scores, np.float64)
    rows, levels, k = scores.shape
    valid = np.isfinite(scores)
    floored = np.where(valid, np.maximum(scores, _FLOOR), _FLOOR)
    top = floored.max(axis=2, keepdims=True)
    logp = floored - (top + np.log(np.sum(np.exp(floored - top) * valid, axis=2, keepdims=True) + 1e-300))
    entropy = -np.sum(np.where(valid, np.exp(logp) * logp, 0.0), axis=2, keepdims=True)
    depth = np.broadcast_to((np.arange(1, levels + 1) / depth_max)[None, :, None], scores.shape)
    features = np.stack([floored, depth, floored - top, np.broadcast_to(entropy, scores.shape)], axis=-1)
    return features.reshape(rows, levels * k, N_NODE_FEATURES), valid.reshape(rows, levels * k)


class C2T(BatchPolicy):
    """Draft ``depth`` levels; verify 1 + the nodes whose predicted acceptance is >= ``threshold``."""

    def __init__(self, classifier, threshold: float, width: int, depth: int, depth_max: int) -> None:
        self.classifier, self.threshold = classifier, threshold
        self.width, self.depth, self.depth_max = width, depth, depth_max
        self.name = f"c2t(t={threshold:g},D={depth})"

    def plan_batch(self, rows, context):
        return np.full(len(rows), self.depth), np.full(len(rows), tree_capacity(self.depth, self.width))

    def choose_size_batch(self, rows, depth, tree_scores, planned):
        features, valid = node_features(tree_scores, self.depth_max)
        p = self.classifier.predict(features.reshape(-1, N_NODE_FEATURES)).reshape(valid.shape)
        return np.minimum(1 + ((p >= self.threshold) & valid).sum(axis=1), planned)


@register_baseline("c2t", help="C2T: a classifier over each drafted node's features keeps the nodes the target "
                   "verifies", grid=(0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5), timing_value=0.2, sized=False)
def c2t(ctx: RuleContext, threshold: float) -> C2T:
    best = ctx.grid_best()
    depth = ctx.depth_max if best is None else int(best.plan_batch(np.zeros(1, np.int64), np.zeros(1))[0][0])
    return C2T(ctx.node_predictor(), threshold, ctx.width, max(depth, 2), ctx.depth_max)
