"""Observations of the learned policies, built by one function each, so that the Gymnasium
environments that train a policy and the deployed policy (in replay or in the real engine) see
bit-identical inputs.

Scores are cumulative draft log-probs as the traces store them (float16, each level sorted best
first, -inf padded). They are floored at ``SCORE_FLOOR`` (padding and hopeless nodes look alike)
and divided by ``SCORE_SCALE`` so that network inputs are O(1).
"""

from __future__ import annotations

import numpy as np

SCORE_FLOOR = -30.0
SCORE_SCALE = 10.0
CONTEXT_SCALE = 4096.0


def _scaled(scores: np.ndarray) -> np.ndarray:
    return np.maximum(scores, SCORE_FLOOR) / SCORE_SCALE


def depth_features(frontier: np.ndarray, depth: np.ndarray, context: np.ndarray, depth_max: int) -> np.ndarray:
    """LTD's depth policy: the newest level's W**2 candidate scores, D / D_max, L / 4096."""
    extra = np.stack([depth / depth_max, context / CONTEXT_SCALE], axis=1)
    return np.concatenate([_scaled(frontier), extra], axis=1).astype(np.float32)


def size_feature_dim(width: int, depth_max: int) -> int:
    return width + (depth_max - 2) * width * width + 2


def size_features(level_scores: np.ndarray, depth: np.ndarray, context: np.ndarray, depth_max: int,
                  width: int) -> np.ndarray:
    """LTD's size policy: every node score of the drafted tree in LTD's padded layout (level 1
    holds W nodes, deeper levels W**2; the root's constant 0 is left out), D / D_max, L / 4096.
    ``level_scores`` is ``[rows, levels, W**2]`` with ``levels <= D_max - 1``; levels at or
    past ``depth - 1`` (not drafted) read as the floor."""
    n, have = level_scores.shape[0], level_scores.shape[1]
    nodes = np.full((n, size_feature_dim(width, depth_max) - 2), SCORE_FLOOR, dtype=np.float32)
    nodes[:, :width] = level_scores[:, 0, :width]
    if have > 1:
        nodes[:, width: width + (have - 1) * width * width] = level_scores[:, 1:].reshape(n, -1)
    level_of_column = np.concatenate([np.zeros(width, dtype=np.int64),
                                      np.repeat(np.arange(1, depth_max - 1), width * width)])
    nodes[level_of_column[None, :] >= (np.asarray(depth) - 1)[:, None]] = SCORE_FLOOR
    extra = np.stack([depth / depth_max, context / CONTEXT_SCALE], axis=1)
    return np.concatenate([_scaled(nodes), extra], axis=1).astype(np.float32)


def radar_features(frontier: np.ndarray, previous_best: np.ndarray, calls: np.ndarray, t_max: int,
                   width: int) -> np.ndarray:
    """RADAR's per-call input: the draft's W most confident continuations after draft call t,
    as probabilities relative to the best path before the call (for the best node's own
    children this is exactly their conditional probability), and t / t_max."""
    relative = np.maximum(frontier[:, :width] - previous_best[:, None], SCORE_FLOOR)
    return np.concatenate([np.exp(relative), (calls / t_max)[:, None]], axis=1).astype(np.float32)


RESPS_FEATURES = 5


def resps_features(context: np.ndarray, mean_accepted: np.ndarray, depth: np.ndarray, total: np.ndarray,
                   depth_max: int) -> np.ndarray:
    """Re-SpS's state at the start of an interval: L / 4096, and over the interval just ended the
    mean accepted length / D_max, the per-draft-step acceptance rate, and the (d, TT) held
    (all zero before a prompt's first interval: ``depth`` 0)."""
    rate = np.where(depth >= 2, mean_accepted / np.maximum(depth - 1, 1), 0.0)
    return np.stack([context / CONTEXT_SCALE, mean_accepted / depth_max, rate, depth / depth_max,
                     total / 128.0], axis=1).astype(np.float32)
