"""The depth rules of ``simspec.policies.baselines`` as registered baselines: each sets the
tree's depth at the traces' width and verifies the grid best's size."""

from __future__ import annotations

from simspec.policies import baselines
from simspec.policies.registry import RuleContext, register_baseline


@register_baseline("ddd", help="dynamic depth: drafts while the beam keeps enough probability mass",
                   grid=(0.05, 0.1, 0.2, 0.3, 0.5, 0.7), timing_value=0.3, default=True)
def ddd(ctx: RuleContext, threshold: float) -> baselines.DDD:
    return baselines.DDD(threshold, ctx.width, ctx.depth_max, ctx.size)


@register_baseline("svip", help="drafts while the newest level's entropy stays low",
                   grid=(0.5, 1.0, 1.5, 2.0, 2.5, 3.0), timing_value=1.5, default=True)
def svip(ctx: RuleContext, max_entropy: float) -> baselines.SVIP:
    return baselines.SVIP(max_entropy, ctx.width, ctx.depth_max, ctx.size)


@register_baseline("gammatune", help="depth from an average of accepted lengths", grid=(0.5,), default=True)
def gammatune(ctx: RuleContext, alpha: float) -> baselines.GammaTune:
    return baselines.GammaTune(alpha, ctx.width, ctx.depth_max, ctx.size)


@register_baseline("analytic", help="seed 003's analytic window", default=True)
def analytic(ctx: RuleContext, _=None) -> baselines.AnalyticWindow:
    return baselines.AnalyticWindow(ctx.cost, ctx.context, 8, ctx.width, ctx.depth_max, ctx.size)


@register_baseline("fsm", help="one level deeper after a full acceptance, one shallower otherwise", default=True)
def fsm(ctx: RuleContext, _=None) -> baselines.FSM:
    return baselines.FSM(ctx.width, ctx.depth_max, ctx.size)


@register_baseline("cachefsm", help="the baselines.FSM moving after 2 agreeing cycles", default=True)
def cachefsm(ctx: RuleContext, _=None) -> baselines.FSM:
    return baselines.FSM(ctx.width, ctx.depth_max, ctx.size, patience=2)


@register_baseline("cachefsm-token", help="seed 003's token-cache baselines.FSM", needs_prompt_tokens=True)
def cachefsm_token(ctx: RuleContext, _=None) -> baselines.TokenCacheFSM:
    return baselines.TokenCacheFSM(ctx.width, ctx.depth_max, ctx.size)


@register_baseline("qlearn", help="online tabular Q-learning of the depth", default=True)
def qlearn(ctx: RuleContext, _=None) -> baselines.QLearning:
    return baselines.QLearning(ctx.cost, ctx.context, width=ctx.width, max_depth=ctx.depth_max, size=ctx.size)


@register_baseline("qlearn-paper", help="seed 003's Q-learning agent")
def qlearn_paper(ctx: RuleContext, _=None) -> baselines.PaperQLearning:
    return baselines.PaperQLearning(ctx.cost, ctx.context, width=ctx.width, max_depth=ctx.depth_max, size=ctx.size)
