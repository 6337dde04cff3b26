"""The static trees a ``bench-engine`` grid names: (D, W, V) configs, each distinct tree once.
A leaf, so that the batched bench (``bench_batch``) and the batch-1 one share it without
importing each other."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from simspec.policies.base import tree_capacity


@dataclass(frozen=True)
class TreeConfig:
    depth: int
    width: int
    size: int

    @property
    def label(self) -> str:
        return f"D={self.depth} W={self.width} V={self.size}"


def config_grid(depths: Sequence[int], widths: Sequence[int], sizes: Sequence[int]) -> list[TreeConfig]:
    """The grid's distinct trees: V is capped at the tree's node count, so (D=3, W=1, V=60)
    and (D=3, W=1, V=8) are the same tree and appear once (with the effective V)."""
    seen: dict[tuple[int, int, int], TreeConfig] = {}
    for depth, width, size in itertools.product(depths, widths, sizes):
        width = 1 if depth == 1 else width  # nothing is drafted: the width is moot
        key = (depth, width, min(size, tree_capacity(depth, width)))
        seen.setdefault(key, TreeConfig(*key))
    return list(seen.values())


def capped_note(depths: Sequence[int], widths: Sequence[int], sizes: Sequence[int]) -> str | None:
    """One line naming the requested sizes V that no tree of the grid holds, so that every config
    asking for them runs capped at its tree's node count (None: each V is used as given at least
    once). Depth 1 drafts nothing, so its V is moot like its W."""
    largest = max((tree_capacity(d, w) for d, w in itertools.product(depths, widths) if d > 1), default=None)
    over = sorted({v for v in sizes if largest is not None and v > largest})
    if not over:
        return None
    return (f"V={','.join(map(str, over))} exceeds every tree of the grid (the largest holds {largest} nodes): "
            "those configs ran with V capped at their tree's node count")
