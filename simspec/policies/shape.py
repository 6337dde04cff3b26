"""A draft tree of fixed shape (numpy only): Sequoia's trees, or any tree written as rank paths.

A shape lists its non-root nodes as *rank paths* (EAGLE/Medusa "choices", vLLM's
``speculative_token_tree``): ``(0, 2)`` is the third-best child of the root's best child. Nodes
are kept breadth first, by depth then path: the order the engine creates them in, so node i of
the shape is node i of the live tree. Replay's accepted drafts are the longest prefix of the
traces' ``child_rank`` (along the greedy path) that is a path of the shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from simspec.errors import SimspecError


@dataclass(frozen=True)
class TreeShape:
    paths: tuple[tuple[int, ...], ...]  # non-root nodes as rank paths; stored breadth first

    def __post_init__(self) -> None:
        paths = sorted({tuple(int(r) for r in p) for p in self.paths}, key=lambda p: (len(p), p))
        if len(paths) != len(self.paths) or any(len(p) == 0 or min(p) < 0 for p in paths):
            raise SimspecError("a tree shape lists distinct, non-empty rank paths of ranks >= 0")
        present = set(paths)
        for p in paths:
            if len(p) > 1 and p[:-1] not in present:
                raise SimspecError(f"tree shape: node {list(p)} has no parent {list(p[:-1])}")
            if p[-1] > 0 and p[:-1] + (p[-1] - 1,) not in present:
                raise SimspecError(f"tree shape: node {list(p)} lacks its better sibling {list(p[:-1]) + [p[-1] - 1]} "
                                   "(a node's children are its drafter's best k)")
        object.__setattr__(self, "paths", tuple(paths))

    @classmethod
    def of(cls, choices) -> TreeShape:
        """From rank paths as lists or tuples (EAGLE/Medusa choices, vLLM's token tree)."""
        return cls(tuple(tuple(c) for c in choices))

    @property
    def size(self) -> int:
        """Nodes, root included: the tokens the target verifies."""
        return len(self.paths) + 1

    @cached_property
    def depths(self) -> np.ndarray:
        """Each node's depth, root (0) first; ascending."""
        return np.array([0] + [len(p) for p in self.paths], dtype=np.int64)

    @property
    def depth(self) -> int:
        """Levels, root included (simspec's D)."""
        return int(self.depths[-1]) + 1

    @cached_property
    def parents(self) -> np.ndarray:
        index = {p: i + 1 for i, p in enumerate(self.paths)}
        return np.array([-1] + [index.get(p[:-1], 0) for p in self.paths], dtype=np.int64)

    @cached_property
    def children(self) -> np.ndarray:
        """Children per node."""
        return np.bincount(self.parents[1:], minlength=self.size)

    @property
    def max_children(self) -> int:
        return max(1, int(self.children.max()))

    @cached_property
    def child_table(self) -> np.ndarray:
        """``[node, rank]`` -> the child's node index, -1 where the shape has none."""
        table = np.full((self.size, self.max_children), -1, dtype=np.int64)
        table[self.parents[1:], [p[-1] for p in self.paths]] = np.arange(1, self.size)
        return table

    @cached_property
    def fed(self) -> np.ndarray:
        """``fed[l - 1]``: nodes of depth l with children (l = 1..D-2), what draft steps 2..D-1 feed."""
        expanded = self.depths[self.children > 0]
        return np.bincount(expanded, minlength=self.depth)[1:self.depth - 1]

    def nodes_within(self, depth) -> np.ndarray:
        """Nodes of depth < D (root included): the shape cut to D levels."""
        return np.searchsorted(self.depths, np.asarray(depth), side="left")

    def accepted(self, child_rank: np.ndarray, depth) -> np.ndarray:
        """Accepted drafts per row: the longest prefix of ``child_rank[row]`` (negative or too large: no
        such child) that is a path of the shape cut to ``depth``."""
        rows = len(child_rank)
        depth = np.broadcast_to(np.asarray(depth), (rows,))
        node = np.zeros(rows, dtype=np.int64)
        count = np.zeros(rows, dtype=np.int64)
        alive = np.ones(rows, dtype=bool)
        k = self.max_children
        for j in range(min(self.depth - 1, child_rank.shape[1])):
            rank = child_rank[:, j].astype(np.int64)
            ok = alive & (rank >= 0) & (rank < k) & (j + 1 < depth)
            nxt = np.where(ok, self.child_table[node, np.clip(rank, 0, k - 1)], -1)
            alive = nxt >= 0
            node = np.where(alive, nxt, 0)
            count += alive
        return count

    def branching(self) -> list[int] | None:
        """Children per node by level when each level's nodes have the same number (vLLM's form), else None."""
        out = []
        for level in range(self.depth - 1):
            counts = np.unique(self.children[self.depths == level])
            if len(counts) != 1:
                return None
            out.append(int(counts[0]))
        return out

    def choices(self) -> list[list[int]]:
        return [list(p) for p in self.paths]
