"""Acceptance at temperature > 0 from the target's probability of each draft-tree node (numpy
only): the simulator's extension of "a tree's acceptance is determined by the recorded tree".

With deterministic (top-k) drafts, EAGLE's verification walk descends into a verified child c
with probability p(c), the target's probability of c's token given c's parent's path, whatever
the siblings' order (rejecting sibling x leaves p(c) / (1 - p(x)) of the remaining mass, and so
on). A node is reached with probability ``reach`` = the product of p along its path, disjointly
for the nodes of one depth. For a verified set S (closed under ancestors):

    P(accepted >= d) = sum of reach over the nodes of S at depth d
    E[accepted]      = sum of reach over the non-root nodes of S

(RADAR's Eqs. 8-10 in tree form.) Sampling from it by its inverse CDF is what a live cycle does
to the length: one uniform number per cycle. Nodes come in the engine's order (score descending,
ties to the shallower then earlier node), root first, so parents precede children and the top-V
set is the first V nodes of a tree of the chosen depth.
"""

from __future__ import annotations

import numpy as np

from simspec.policies.base import keep_best_children


def reach_probabilities(parents: np.ndarray, probs: np.ndarray) -> np.ndarray:
    """The probability that the walk reaches each node (root 1) from ``parents[..., i]`` (node i's
    parent; root -1, at 0) and ``probs[..., i]``; leading axes are independent trees."""
    parents = np.asarray(parents)
    reach = np.ones(probs.shape, dtype=np.float64)
    flat_reach, flat_parents = reach.reshape(-1, reach.shape[-1]), parents.reshape(-1, parents.shape[-1])
    flat_probs = np.asarray(probs, dtype=np.float64).reshape(flat_reach.shape)
    rows = np.arange(len(flat_reach))
    for i in range(1, reach.shape[-1]):  # parents precede children: one pass in node order
        flat_reach[:, i] = flat_reach[rows, flat_parents[:, i]] * flat_probs[:, i]
    return reach


def stored_reach(node_depth: np.ndarray, node_parent: np.ndarray, node_prob: np.ndarray, depth_max: int
                 ) -> np.ndarray:
    """``reach_probabilities`` of traces' stored nodes, padding (``PAD_DEPTH``) reached with 0."""
    real = node_depth <= depth_max
    reach = reach_probabilities(np.where(real, node_parent, 0).clip(0), np.where(real, node_prob, 0.0))
    reach[:, 0] = 1.0
    return reach


def verified_mask(depths: np.ndarray, depth: int, size: int) -> np.ndarray:
    """The nodes a (D, V) cycle verifies: the root and the first V - 1 nodes of depth < D."""
    inside = depths < depth
    rank = np.cumsum(inside, axis=-1) - 1  # rank among the tree's nodes, root 0
    return inside & (rank < size)


def at_least(reach: np.ndarray, depths: np.ndarray, verified: np.ndarray, depth_max: int) -> np.ndarray:
    """P(accepted >= d) for d = 0..depth_max - 1, per tree: [..., depth_max]."""
    out = np.empty(reach.shape[:-1] + (depth_max,), dtype=np.float64)
    for d in range(depth_max):
        out[..., d] = np.where(verified & (depths == d), reach, 0.0).sum(-1)
    out[..., 0] = 1.0
    return np.minimum(out, 1.0)


def accepted_distribution(reach: np.ndarray, depths: np.ndarray, verified: np.ndarray, depth_max: int) -> np.ndarray:
    """P(accepted = a) for a = 0..depth_max - 1, per tree."""
    tail = at_least(reach, depths, verified, depth_max)
    return tail - np.concatenate([tail[..., 1:], np.zeros(tail.shape[:-1] + (1,))], -1)


def expected_accepted(reach: np.ndarray, verified: np.ndarray) -> np.ndarray:
    """E[accepted draft tokens] per tree: the reach summed over the verified non-root nodes."""
    return np.where(verified, reach, 0.0)[..., 1:].sum(-1)


def sample_accepted(tail: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """Accepted lengths by inverse CDF from ``tail`` = P(accepted >= d): the largest d with u < tail."""
    return (uniforms[..., None] < tail).sum(-1) - 1


def stored_nodes(scores: np.ndarray, depths: np.ndarray, depth_max: int, nodes: int) -> np.ndarray:
    """Tree indices, in engine order, of every node some (D, V <= ``nodes``) cycle verifies: the union
    over D of the best ``nodes`` nodes of depth < D (closed under ancestors)."""
    order = np.argsort(-scores, kind="stable")
    keep = np.zeros(len(scores), dtype=bool)
    for d_levels in range(2, depth_max + 1):
        keep[order[depths[order] < d_levels][:nodes]] = True
    return order[keep[order]]


def acceptance_tails(node_depth: np.ndarray, node_parent: np.ndarray, node_prob: np.ndarray, depth_max: int,
                     nodes: int) -> np.ndarray:
    """Every (D, V) cycle's P(accepted >= d) from traces' node arrays: [positions, depth_max - 1,
    nodes, depth_max] float32 for D = 2..depth_max, V = 1..nodes. Each depth's reach summed over a
    running prefix of the nodes of depth < D gives all sizes at once."""
    positions, k = node_depth.shape
    depth = node_depth.astype(np.int64)
    real = depth <= depth_max  # padding holds PAD_DEPTH
    reach = stored_reach(depth, node_parent, node_prob, depth_max)
    tails = np.zeros((positions, depth_max - 1, nodes, depth_max), dtype=np.float32)
    levels = np.arange(depth_max)
    for block in range(0, positions, 1024):  # bounded temporaries
        part = slice(block, min(block + 1024, positions))
        rows = np.arange(part.stop - part.start)[:, None]
        # by_depth[p, k, d]: node k's reach when it sits at depth d, else 0; running: summed over
        # the first k + 1 nodes. A node at depth d is inside every cycle of D > d levels, so a
        # D-level cycle's running sums are these, with the depths >= D zeroed.
        by_depth = np.where(depth[part, :, None] == levels, reach[part, :, None], 0.0)
        running = np.cumsum(by_depth, axis=1)  # [rows, K, depth_max]
        for d_levels in range(2, depth_max + 1):
            inside = real[part] & (depth[part] < d_levels)
            # the V-th inside node's column (past the last one: the last column, which holds them all)
            column = np.full((len(rows), nodes), k - 1)
            first = np.argsort(~inside, axis=1, kind="stable")[:, :nodes]  # the inside nodes' columns, in order
            column[:, :first.shape[1]] = np.where(np.arange(first.shape[1]) < inside.sum(1)[:, None], first, k - 1)
            tails[part, d_levels - 2] = np.where(levels < d_levels, running[rows, column], 0.0)
    tails[..., 0] = 1.0
    return np.minimum(tails, 1.0)


def pruned_tails(node_depth: np.ndarray, node_parent: np.ndarray, reach: np.ndarray, depth: int, size: int,
                 children: int, depth_max: int) -> tuple[np.ndarray, np.ndarray]:
    """Re-SpS's top-k cycles at every position: the (D, V) set, each node keeping its ``children``
    best children of the set (``keep_best_children``, as the engine prunes): (nodes verified [positions],
    P(accepted >= d) [positions, depth_max]). Stored nodes come in engine order, so a node's siblings
    precede it best first."""
    verified = verified_mask(node_depth.astype(np.int64), depth, size)
    keep = keep_best_children(node_parent.astype(np.int64), verified, children, depth_max)
    tail = at_least(reach, node_depth, keep, depth_max).astype(np.float32)
    return keep.sum(1), tail
