"""SpecDec++ and Disco as registered baselines: one acceptance classifier, fitted on the train
split on first use (``RuleContext.predictor``), shared by both."""

from __future__ import annotations

from simspec.policies.registry import RuleContext, register_baseline
from simspec.policies.stopping import DiscoStop, SpecDecPP


@register_baseline("specdecpp", help="stops when a rejection gets likely (an acceptance classifier trained on the "
                   "train split)", grid=(0.3, 0.5, 0.7, 0.8, 0.9, 0.95), timing_value=0.5)
def specdecpp(ctx: RuleContext, threshold: float) -> SpecDecPP:
    return SpecDecPP(ctx.predictor(), threshold, ctx.width, ctx.depth_max, ctx.size)


@register_baseline("disco", help="stops when the newest token's acceptance gets unlikely (the same classifier)",
                   grid=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9), timing_value=0.3)
def disco(ctx: RuleContext, threshold: float) -> DiscoStop:
    return DiscoStop(ctx.predictor(), threshold, ctx.width, ctx.depth_max, ctx.size)
