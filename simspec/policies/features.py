"""Observations of the learned policies, one function each, so that the training environments and
the deployed policy see bit-identical inputs. Scores (as traces store them) are floored at
``SCORE_FLOOR`` (padding and hopeless nodes look alike) and divided by ``SCORE_SCALE`` (inputs O(1))."""

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
    """LTD's size policy: every node score in LTD's padded layout (level 1: W nodes, deeper: W**2; no
    root), D / D_max, L / 4096, from ``[rows, levels, W**2]``; levels not drafted read as the floor."""
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
    """RADAR's per-call input: the W best continuations after draft call t as probabilities relative
    to the best path before the call (its children's conditional probability), and t / t_max."""
    relative = np.maximum(frontier[:, :width] - previous_best[:, None], SCORE_FLOOR)
    return np.concatenate([np.exp(relative), (calls / t_max)[:, None]], axis=1).astype(np.float32)


RESPS_FEATURES = 5


def resps_features(context: np.ndarray, last: np.ndarray, depth_max: int, width: int) -> np.ndarray:
    """Re-SpS's state at an interval's start from ``last`` = [mean accepted, TT, d(, k)] over the
    interval ended (zeros before the first): L / 4096, the mean accepted length / D_max, the per-step
    acceptance rate, d / D_max, TT / 128 (and k / W where the policy chooses its top-k)."""
    mean_accepted, total, depth = last[:, 0], last[:, 1], last[:, 2]
    rate = np.where(depth >= 2, mean_accepted / np.maximum(depth - 1, 1), 0.0)
    columns = [context / CONTEXT_SCALE, mean_accepted / depth_max, rate, depth / depth_max, total / 128.0]
    if last.shape[1] == 4:
        columns.append(last[:, 3] / width)
    return np.stack(columns, axis=1).astype(np.float32)
