"""The static trees a ``bench-engine`` grid names, and their rows: a leaf both benches share."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from simspec.policies.base import StaticPolicy, tree_capacity


@dataclass(frozen=True)
class TreeConfig:
    depth: int
    width: int
    size: int

    def policy(self) -> StaticPolicy:
        """The tree as a static policy, named by its config."""
        return StaticPolicy(self.depth, self.width, self.size, f"D={self.depth} W={self.width} V={self.size}")


def config_row(config: TreeConfig, runs, quartiles, repeat_medians: list[float], tau: float, tokens_per_s: float,
               shares: list[dict], divergences: list[dict]) -> dict:
    """One config's ``--json`` row: ``runs``, its ``interleave.Verdict``; ``quartiles``: q25, median, q75."""
    q25, median, q75 = (float(q) for q in quartiles)
    return {**asdict(config), "speedup": median, "speedup_q25": q25, "speedup_q75": q75,
            "repeat_medians": repeat_medians, "tau": tau, "tokens_per_s": tokens_per_s, "lossless": runs.lossless,
            "exact_match": None if runs.sampled else not runs.divergences,  # T > 0: judged by the PIT
            "pit_p": runs.pit_p, "pit_tokens": len(runs.pit or ()), "divergences": divergences,
            "time_shares": {k: float(np.mean([s[k] for s in shares])) for k in shares[0]}}


def config_grid(depths: Sequence[int], widths: Sequence[int], sizes: Sequence[int]) -> list[TreeConfig]:
    """The grid's distinct trees: V is capped at the tree's node count, so (D=3, W=1, V=60) is V=8's."""
    seen: dict[tuple[int, int, int], TreeConfig] = {}
    for depth, width, size in itertools.product(depths, widths, sizes):
        width = 1 if depth == 1 else width  # nothing is drafted: the width is moot
        key = (depth, width, min(size, tree_capacity(depth, width)))
        seen.setdefault(key, TreeConfig(*key))
    return list(seen.values())


def capped_note(depths: Sequence[int], widths: Sequence[int], sizes: Sequence[int]) -> str | None:
    """A line naming the sizes V no tree of the grid holds (configs ran capped), or None."""
    largest = max((tree_capacity(d, w) for d, w in itertools.product(depths, widths) if d > 1), default=None)
    over = sorted({v for v in sizes if largest is not None and v > largest})
    if not over:
        return None
    return (f"V={','.join(map(str, over))} exceeds every tree of the grid (the largest holds {largest} nodes): "
            "those configs ran with V capped at their tree's node count")
