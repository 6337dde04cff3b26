"""Static trees as baselines: EAGLE-3's default and the best static tree of the train split."""

from __future__ import annotations

from simspec.policies.base import StaticPolicy, eagle3_default
from simspec.policies.registry import RuleContext, register_baseline


@register_baseline("eagle3", help="EAGLE-3's default tree", default=True, sized=False, charged_as="static")
def eagle3(ctx: RuleContext, _=None) -> StaticPolicy:
    """At the traces' width (a trace holds one width)."""
    default = eagle3_default()
    if default.width == ctx.width:
        return default
    return StaticPolicy(default._plan.depth, ctx.width, default._plan.size, f"{default.name}(W={ctx.width})")


@register_baseline("grid", help="the static tree fastest on the train split", default=True, sized=False,
                   charged_as="static")
def grid(ctx: RuleContext, _=None) -> StaticPolicy:
    return ctx.grid_best()
