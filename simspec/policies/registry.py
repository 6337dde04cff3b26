"""The rule-baseline registry: every name ``--baselines`` accepts, each one decorated factory
``make(ctx, value) -> BatchPolicy`` (``@register_baseline("ddd", help=..., grid=(0.05, 0.1))``).
The simulator builds it once per ``grid`` value and keeps the one that replays fastest on the
train split; calibrate's decision-time table times ``make(ctx, timing_value)``. numpy only:
the simulator (``simspec.sim.evaluate``) drives the tuning. See docs/extending.md."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from simspec.policies.base import BatchPolicy, Costs, StaticPolicy
from simspec.registry import Registry

PROMPT_LEVEL = ("select",)  # methods choosing per prompt, not per cycle (``validate --simulated`` scores them)


@dataclass(frozen=True)
class RuleContext:
    """What a baseline is built from: the traces' width and depth, the size depth rules verify (the
    grid best's: they differ from it in depth only), the median context, the cost model, and
    callables that fit on the train split on first use."""

    width: int
    depth_max: int
    size: int | None  # None only when no requested baseline is ``sized``
    context: int
    cost: Costs
    predictor: Callable[[], Any]  # -> the acceptance classifier (SpecDec++, Disco)
    grid_best: Callable[[], BatchPolicy]
    acceptance: Callable[[], Any] | None = None  # -> acceptance by child rank (Sequoia); None: not at hand
    node_predictor: Callable[[], Any] | None = None  # -> C2T's node classifier
    tree_predictor: Callable[[], Any] | None = None  # -> it fitted over every node a tree verifies (Bayes)


@dataclass(frozen=True)
class BaselineSpec:
    name: str
    make: Callable[[RuleContext, Any], BatchPolicy]
    help: str  # one phrase for --help, e.g. "moves after 2 agreeing cycles"
    grid: tuple = (None,)  # values tuned over on the train split, in order (ties: the first)
    timing_value: Any = None  # the value timed for the decision-time table (default: grid[0])
    default: bool = False  # in validate's default --baselines
    sized: bool = True  # verifies ctx.size nodes (a depth rule): the grid search runs to find it
    charged_as: str | None = None  # pays another family's decision time (static trees: 'static')
    needs_prompt_tokens: bool = False  # reads the prompts' tokens (a token cache): traces must hold them

    def build(self, ctx: RuleContext, score: Callable[[BatchPolicy], float] | None = None) -> BatchPolicy:
        """The member of the family ``score`` ranks best (the first of ties); one value: no scoring."""
        if len(self.grid) == 1 or score is None:
            return self.make(ctx, self.grid[0])
        return max((self.make(ctx, v) for v in self.grid), key=score)

    def timed(self, ctx: RuleContext) -> BatchPolicy:
        return self.make(ctx, self.grid[0] if self.timing_value is None else self.timing_value)


BASELINE_REGISTRY: Registry[BaselineSpec] = Registry("baseline", ("simspec.policies.rules",))


def register_baseline(name: str, *, help: str, grid: tuple = (None,), **options: Any):
    """Decorator: registers ``make(ctx, value) -> BatchPolicy`` as the baseline ``name`` (``options``: the
    rest of ``BaselineSpec``'s fields)."""
    def decorate(make: Callable[[RuleContext, Any], BatchPolicy]):
        BASELINE_REGISTRY.add(name, BaselineSpec(name, make, help, tuple(grid), **options))
        return make
    return decorate


def baseline_names() -> tuple[str, ...]:
    return BASELINE_REGISTRY.names()


def default_baselines() -> tuple[str, ...]:
    return tuple(s.name for s in BASELINE_REGISTRY.specs() if s.default)


def baseline(name: str) -> BaselineSpec:
    return BASELINE_REGISTRY.get(name, unknown_baseline)


def unknown_baseline(name: str, prompt_level: bool = True) -> str:
    choices = baseline_names() + (PROMPT_LEVEL if prompt_level else ())
    return f"unknown baseline {name!r}: choose from {', '.join(choices)} or static:D,V"


def baselines_help() -> str:
    """``--baselines``'s help, from the registry."""
    listed = ", ".join(f"{s.name} ({s.help})" for s in BASELINE_REGISTRY.specs())
    return (f"Comma-separated: {listed}, static:D,V (or static:DxV), select (--simulated: seed 003's per-prompt "
            "draft selection among the profile's drafter and --drafters). Tunable ones are tuned on the profile's "
            "train split.")


def timing_policies(cost: Costs, width: int, depth_max: int) -> dict[str, BatchPolicy]:
    """One untuned instance of every family that pays its own decision time, plus 'static': decision
    time does not depend on tuned thresholds."""
    from simspec.policies.stopping import AcceptancePredictor

    ctx = RuleContext(width, depth_max, 60, 256, cost, AcceptancePredictor.random, lambda: None,
                      node_predictor=lambda: AcceptancePredictor.random(features=4),
                      tree_predictor=lambda: AcceptancePredictor.random(features=4))
    return {"static": StaticPolicy(depth_max, width, 60),
            **{s.name: s.timed(ctx) for s in BASELINE_REGISTRY.specs() if s.charged_as is None}}
