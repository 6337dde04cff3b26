"""Sequoia's hardware-aware static tree (Chen et al., 2024) as a baseline (numpy only).

Sequoia models acceptance by a child's rank alone: ``p[r]``, measured on the train split's greedy
paths. A tree's expected accepted drafts are the sum over its nodes of the product of ``p`` along
the node's rank path; Sequoia's dynamic program finds the best tree of n nodes and D levels.
With ``p`` non-increasing in rank (pooled to be so) that optimum is the n best rank paths by their
product (a node is worth at most its parent and its better sibling), so a best-first expansion
yields the optimal tree of every size at once (the tests check it against the recursion). (n, D)
then maximise expected tokens per second of the cycle on the profile's curves.
"""

from __future__ import annotations

import heapq

import numpy as np

from simspec.errors import SimspecError
from simspec.policies.base import Costs, DraftPlan, StaticPolicy
from simspec.policies.registry import RuleContext, register_baseline
from simspec.policies.shape import TreeShape

MAX_NODES = 240  # the largest tree considered (root included): the static grid's largest V


def positional_acceptance(child_rank: np.ndarray, cap: int = 16, by_depth: bool = False) -> np.ndarray:
    """``p[d - 1, r]``, r < ``cap``: the share of greedy-path nodes of depth d that were their parent's
    rank-r child, non-increasing in r; pooled over depths (Sequoia's) unless ``by_depth``."""
    levels = child_rank.shape[1]
    observed = child_rank >= 0
    if not observed.any():
        raise SimspecError("no greedy-path nodes observed in these traces: Sequoia needs train prompts with "
                           "recorded continuations")

    def fitted(ranks: np.ndarray) -> np.ndarray:
        counts = np.bincount(ranks[ranks < cap].astype(np.int64), minlength=cap)[:cap].astype(np.float64)
        return non_increasing(counts / len(ranks), counts + 1.0)

    pooled = fitted(child_rank[observed])
    if not by_depth:
        return np.tile(pooled, (levels, 1))
    return np.stack([fitted(child_rank[observed[:, j], j]) if observed[:, j].any() else pooled for j in range(levels)])


def split_acceptance(traces, by_depth: bool = False) -> np.ndarray:
    """``positional_acceptance`` over every position of a trace set (the train split's)."""
    return positional_acceptance(traces.child_ranks(np.arange(traces.positions)), by_depth=by_depth)


def non_increasing(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The weighted least-squares non-increasing fit (pool adjacent violators)."""
    blocks: list[list[float]] = []  # [mean, weight, length]
    for v, w in zip(values.tolist(), weights.tolist()):
        blocks.append([v, w, 1])
        while len(blocks) > 1 and blocks[-2][0] < blocks[-1][0]:
            v2, w2, n2 = blocks.pop()
            v1, w1, n1 = blocks.pop()
            blocks.append([(v1 * w1 + v2 * w2) / (w1 + w2), w1 + w2, n1 + n2])
    return np.concatenate([np.full(n, v) for v, _, n in blocks])


def best_first(p: np.ndarray, levels: int, nodes: int) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """The ``nodes`` best rank paths of at most ``levels`` ranks by the product of ``p[depth - 1, rank]``,
    best first (ties: the smaller path), with their values: every prefix is the optimal tree."""
    levels = min(levels, len(p))
    heap: list[tuple[float, tuple[int, ...], float]] = [(-float(p[0, 0]), (0,), 1.0)] if levels >= 1 else []
    paths, values = [], []
    while heap and len(paths) < nodes:
        negative, path, parent_value = heapq.heappop(heap)
        paths.append(path)
        values.append(-negative)
        depth, rank = len(path), path[-1]
        if rank + 1 < p.shape[1]:  # the next sibling
            heapq.heappush(heap, (-parent_value * float(p[depth - 1, rank + 1]), path[:-1] + (rank + 1,),
                                  parent_value))
        if depth < levels:  # the first child
            heapq.heappush(heap, (negative * float(p[depth, 0]), path + (0,), -negative))
    return paths, np.asarray(values)


def sequoia_shape(p: np.ndarray, cost: Costs, context: int, depth_max: int, max_nodes: int = MAX_NODES
                  ) -> tuple[TreeShape, dict]:
    """The (n, D) tree that maximises expected tokens per cycle over its seconds, and its numbers."""
    best: tuple[float, TreeShape, dict] | None = None
    for depth in range(2, depth_max + 1):
        paths, values = best_first(p, depth - 1, max_nodes - 1)
        if not paths:
            continue
        expected = np.cumsum(values)  # accepted drafts of the first n + 1 nodes' tree
        n = np.arange(1, len(paths) + 1)
        levels = np.maximum.accumulate([len(q) for q in paths])  # the tree's deepest rank path
        # draft steps 2..: each feeds its level's expanded nodes (a node is expanded once its first child is in)
        fed = np.zeros((len(paths), depth_max), dtype=np.int64)
        for i, q in enumerate(paths):
            fed[i] = fed[i - 1] if i else 0
            if q[-1] == 0 and len(q) > 1:
                fed[i, len(q) - 1] += 1
        committed = np.rint(expected + 1)
        seconds = cost.draft(committed, context) + cost.verify(n + 1, context)
        for level in range(1, depth_max - 1):
            used = (fed[:, level] > 0) & (level <= levels - 1)
            seconds = seconds + np.where(used, cost.draft(np.maximum(fed[:, level], 1), context), 0.0)
        book = getattr(cost, "bookkeeping", None)
        if book is not None:
            seconds = seconds + book(n + 1, levels + 1)
        speed = (expected + 1) / seconds
        i = int(np.argmax(speed))
        if best is None or speed[i] > best[0]:
            shape = TreeShape(tuple(paths[: i + 1]))
            best = (float(speed[i]), shape, {"nodes": shape.size, "depth": shape.depth,
                                             "expected_tokens": float(expected[i] + 1),
                                             "cycle_seconds": float(seconds[i])})
    if best is None:
        raise SimspecError("Sequoia needs traces at least 2 levels deep")
    return best[1], best[2]


class SequoiaTree(StaticPolicy):
    """One tree of fixed shape, every cycle: the engines draft and verify exactly it."""

    def __init__(self, shape: TreeShape, name: str | None = None) -> None:
        super().__init__(shape.depth, shape.max_children, shape.size)
        self._plan = DraftPlan(shape.depth, shape.max_children, shape.size, shape)
        self.shape = shape
        self.name = name or f"sequoia(n={shape.size},D={shape.depth})"


def _built(ctx: RuleContext, by_depth: bool, name: str) -> SequoiaTree:
    if ctx.acceptance is None:
        raise SimspecError(f"{name} needs the train split's traces (their child ranks) to measure acceptance by rank")
    shape, _ = sequoia_shape(ctx.acceptance(by_depth), ctx.cost, ctx.context, ctx.depth_max)
    return SequoiaTree(shape, f"{name}(n={shape.size},D={shape.depth})")


@register_baseline("sequoia", help="Sequoia's hardware-aware tree: the best tree of any shape for the drafter's "
                   "acceptance by rank and the measured costs", sized=False, charged_as="static")
def sequoia(ctx: RuleContext, _=None) -> SequoiaTree:
    return _built(ctx, False, "sequoia")


@register_baseline("sequoia-depth", help="Sequoia's tree from acceptance by rank at each depth (a draft head's "
                   "acceptance falls with depth)", sized=False, charged_as="static")
def sequoia_depth(ctx: RuleContext, _=None) -> SequoiaTree:
    return _built(ctx, True, "sequoia-depth")
