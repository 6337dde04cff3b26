"""The draft tree, EAGLE-2 style, kept in numpy on the host.

Nodes live in creation order: the root (the last accepted token) at 0, then each level. The
first step adds the root's top-W children; every later step expands the W *frontier* nodes
(the previous level's best cumulative scores), W children each, keeping all W**2: a tree of D
levels holds ``1 + W + (D - 2) * W**2`` nodes (LTD's count).

Index order is depth order, so a stable sort by score breaks ties by depth, then creation, and
every top-V selection is closed under ancestors (``select_nodes``, which the simulator shares).
"""

from __future__ import annotations

import numpy as np

from simspec.policies.base import keep_best_children, tree_capacity
from simspec.policies.shape import TreeShape


def select_nodes(scores: np.ndarray, size: int) -> np.ndarray:
    """Indices (ascending) of the ``size`` best nodes by cumulative score, ties to the shallower, then earlier."""
    order = np.argsort(-scores, kind="stable")[:size]
    return np.sort(order)


class DraftTree:
    """A growing draft tree: token, parent, depth, cumulative score and ancestor set per node."""

    def __init__(self, root_token: int, depth_cap: int, width: int, capacity: int | None = None) -> None:
        capacity = tree_capacity(depth_cap, width) if capacity is None else capacity
        self.width = width
        self.tokens = np.empty(capacity, dtype=np.int64)
        self.parents = np.empty(capacity, dtype=np.int64)
        self.depths = np.empty(capacity, dtype=np.int64)
        self.scores = np.empty(capacity, dtype=np.float32)
        # ancestors[i, j]: j is i or an ancestor of i. Dense: at most ~1000 nodes, and it makes
        # every attention mask a single fancy-index.
        self.ancestors = np.zeros((capacity, capacity), dtype=bool)
        self.tokens[0], self.parents[0], self.depths[0], self.scores[0] = root_token, -1, 0, 0.0
        self.ancestors[0, 0] = True
        self.n = 1
        self.levels = 1
        self.frontier = np.zeros(1, dtype=np.int64)  # nodes whose children the next step drafts
        self._fed: list[np.ndarray] = []  # non-root nodes already run through the drafter

    def grow(self, top_logprobs: np.ndarray, top_tokens: np.ndarray) -> np.ndarray:
        """Add the frontier's children: ``top_*[i, k]`` is the k-th child of ``frontier[i]``.
        Returns the new level's cumulative scores (what depth policies observe)."""
        new, scores = self._append(np.repeat(self.frontier, top_tokens.shape[1]), top_tokens.ravel(),
                                   top_logprobs.ravel())
        best = np.argsort(-scores, kind="stable")[: self.width]
        self.frontier = new[np.sort(best)]
        return scores

    def _append(self, parents: np.ndarray, tokens: np.ndarray, logprobs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A new level of children of ``parents``: their node indices and cumulative scores."""
        new = np.arange(self.n, self.n + len(parents))
        self.tokens[new] = tokens
        self.parents[new] = parents
        self.depths[new] = self.levels
        scores = self.scores[parents] + logprobs.astype(np.float32)
        self.scores[new] = scores
        self.ancestors[new] = self.ancestors[parents]
        self.ancestors[new, new] = True
        self.n += len(new)
        self.levels += 1
        return new, scores

    def feed_frontier(self) -> tuple[np.ndarray, int, np.ndarray]:
        """The frontier's tokens, their depth, and which fed nodes each may attend to
        (``visible`` over previously fed nodes then the frontier itself)."""
        slots = np.concatenate([*self._fed, self.frontier])
        visible = self.ancestors[np.ix_(self.frontier, slots)]
        self._fed.append(self.frontier)
        return self.tokens[self.frontier], self.levels - 1, visible

    def verification(self, size: int, children: int | None = None) -> Verification:
        """The ``size`` best nodes, flattened in depth order with their tree mask; ``children``: each
        keeps at most that many of its own (Re-SpS's top-k; siblings are created best first)."""
        rows = select_nodes(self.scores[: self.n], min(size, self.n))
        if children is not None and children < self.width:
            parents = np.searchsorted(rows, self.parents[rows])
            parents[0] = -1
            rows = rows[keep_best_children(parents, np.ones(len(rows), dtype=bool), children, self.levels)[0]]
        return Verification(
            nodes=rows,
            tokens=self.tokens[rows],
            depths=self.depths[rows],
            visible=self.ancestors[np.ix_(rows, rows)],
            parent_rows=np.searchsorted(rows, self.parents[rows[1:]]),
        )


class ShapedTree(DraftTree):
    """A tree of fixed shape (``TreeShape``), cut at ``depth_cap`` levels: each expanded node
    keeps its drafter's best k children, k as the shape says. Its node i is the shape's node i
    (both breadth first), so verifying ``shape.size`` nodes verifies exactly the shape."""

    def __init__(self, root_token: int, depth_cap: int, shape: TreeShape) -> None:
        super().__init__(root_token, min(depth_cap, shape.depth), shape.max_children, shape.size)
        self.shape = shape

    def grow(self, top_logprobs: np.ndarray, top_tokens: np.ndarray) -> np.ndarray:
        keep = np.arange(top_tokens.shape[1])[None, :] < self.shape.children[self.frontier][:, None]
        new, scores = self._append(np.repeat(self.frontier, keep.sum(1)), top_tokens[keep], top_logprobs[keep])
        self.frontier = new[self.shape.children[new] > 0]
        return scores


class Verification:
    """The flattened slice of a tree that the target checks in one forward pass."""

    def __init__(self, nodes, tokens, depths, visible, parent_rows) -> None:
        self.nodes = nodes  # tree indices, ascending; nodes[0] == 0 (the root)
        self.tokens = tokens
        self.depths = depths
        self.visible = visible  # [V, V] ancestor-or-self
        self.parent_rows = parent_rows  # row of each non-root row's parent

    def __len__(self) -> int:
        return len(self.nodes)

    def accept(self, target_next: np.ndarray) -> tuple[np.ndarray, int]:
        """Longest path agreeing with ``target_next`` (the greedy token after each row): the accepted
        rows (root first) and the bonus token after the last one."""
        agrees = np.ones(len(self.nodes), dtype=bool)
        agrees[1:] = self.tokens[1:] == target_next[self.parent_rows]
        on_greedy_path = ~(self.visible & ~agrees).any(axis=1)
        deepest = int(np.argmax(np.where(on_greedy_path, self.depths, -1)))
        return np.flatnonzero(self.visible[deepest]), int(target_next[deepest])
