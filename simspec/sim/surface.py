"""The static trees ``tune`` ranks: each (D, V) replayed on the train prompts, fastest first.
Its own module, so that ``tune`` and its per-batch-size pass (``tune_batches``) share it
without importing each other (numpy only)."""

from __future__ import annotations

from simspec.sim.replay import mean_speedup


def tree_surface(train, cost, max_new_tokens: int | None, chain: bool) -> dict:
    """(D, V) -> its static tree's replay on ``train``: every chain (V = D) if ``chain``, else the grid's trees."""
    from simspec.policies.base import StaticPolicy, tree_capacities
    from simspec.sim.evaluate import GRID_DEPTHS, GRID_SIZES, static_surface
    from simspec.sim.replay import replay

    width = train.width
    if chain:
        return {(d, d): replay(train, cost, StaticPolicy(d, width, d), max_new_tokens)
                for d in GRID_DEPTHS if d <= train.depth_max}
    surface = {}
    for (d, v), res in static_surface(train, cost, max_new_tokens, GRID_DEPTHS, GRID_SIZES).items():
        surface.setdefault((d, int(min(v, tree_capacities(d, width)))), res)
    return surface


def ranking(surface: dict) -> list[tuple[int, int]]:
    """The surface's trees, fastest first (mean speedup over prompts; ties: the smaller tree)."""
    return sorted(surface, key=lambda k: (-mean_speedup(surface[k]), k[1], k[0]))
