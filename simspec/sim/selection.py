"""Seed 003's per-prompt draft-model selection, in replay (numpy only).

Several drafters of one target, each with its traces of the same prompts and its profile:

1. Each prompt is described by features of its tokens (``PROMPT_FEATURES``).
2. A drafter's single-token accuracy α on a prompt is predicted from them by least squares,
   fitted per drafter on the train split.
3. The paper's Eq. 4, the speedup of a γ-token chain at acceptance α and draft-to-target cost
   ratio c (from the drafter's profile), ``(1 - α^(γ+1)) / ((1 - α)(γ c + 1))``, maximised over γ.
4. The prompt is decoded with the drafter ranked first.

Each drafter decodes with its own best static tree (drafters are compared, not tree shapes). The
selection is scored against the drafter best on average on the train split, and against the
hindsight choice per prompt.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields

import numpy as np

from simspec.errors import SimspecError
from simspec.sim.costmodel import CostModel
from simspec.sim.replay import ReplayResult, replay
from simspec.sim.traces import TraceSet

PROMPT_FEATURES = ("bias", "log_length", "distinct_share", "repeated_bigram_share")
GAMMA_MAX = 16  # window sizes the throughput model considers


@dataclass(frozen=True)
class Drafter:
    """One candidate: its name, its profile's path, its traces (aligned) and its cost model."""

    name: str
    profile: str
    traces: TraceSet
    cost: CostModel


def prompt_features(traces: TraceSet) -> np.ndarray:
    """``[prompts, len(PROMPT_FEATURES)]`` (repetitive prompts are easy to draft: code, lists)."""
    if not traces.has_prompt_tokens:
        raise SimspecError("draft selection reads the prompts' tokens, and these traces hold none: record them again "
                           "(`simspec calibrate --traces-only ... --force`)")
    rows = []
    for tokens in traces.prompt_token_lists():
        pairs = tokens[:-1].astype(np.int64) * (1 << 32) + tokens[1:]
        _, first = np.unique(pairs, return_index=True)
        rows.append((1.0, np.log(len(tokens)), len(np.unique(tokens)) / len(tokens),
                     1 - len(first) / max(len(pairs), 1)))
    return np.asarray(rows)


def single_token_accuracy(traces: TraceSet) -> np.ndarray:
    """α per prompt: the mean chance over its positions that the first step's best draft is accepted."""
    rows = np.arange(traces.positions)
    first = traces.expected_accepted(rows, np.full(traces.positions, 2), np.full(traces.positions, 2))
    counts = np.diff(traces.prompt_offsets)
    prompt_of = np.repeat(np.arange(traces.n_prompts), counts)
    return np.bincount(prompt_of, weights=first, minlength=traces.n_prompts) / np.maximum(counts, 1)


def chain_speedup(alpha: np.ndarray, ratio: np.ndarray, gamma_max: int = GAMMA_MAX) -> np.ndarray:
    """Seed 003's Eq. 4 at the best window: max over γ = 1..gamma_max of
    (1 - α^(γ+1)) / ((1 - α)(γ c + 1)); broadcasts over α and c."""
    alpha = np.clip(np.asarray(alpha, dtype=float), 1e-3, 0.999)[..., None]
    ratio = np.asarray(ratio, dtype=float)[..., None]
    gamma = np.arange(1, gamma_max + 1)
    return np.max((1 - alpha ** (gamma + 1)) / ((1 - alpha) * (gamma * ratio + 1)), axis=-1)


def cost_ratio(cost: CostModel, width: int, context: float) -> float:
    """One draft step (``width`` nodes) over one plain target step, at ``context`` tokens."""
    return float(cost.draft(width, context) / cost.greedy(context))


@dataclass(frozen=True)
class DraftSelector:
    """The fitted rule: α's coefficients per drafter ``[drafters, features]`` and the cost ratios."""

    coef: np.ndarray
    ratios: np.ndarray

    @classmethod
    def fit(cls, features: np.ndarray, alpha: np.ndarray, ratios: np.ndarray) -> DraftSelector:
        """``features`` ``[prompts, k]`` and ``alpha`` ``[prompts, drafters]`` of the reference prompts."""
        if len(features) < features.shape[1]:
            raise SimspecError(f"draft selection fits {features.shape[1]} coefficients per drafter and needs at least "
                               f"as many reference (train) prompts, got {len(features)}: record more prompts")
        coef, *_ = np.linalg.lstsq(features, alpha, rcond=None)
        return cls(coef.T, np.asarray(ratios, dtype=float))

    def alpha(self, features: np.ndarray) -> np.ndarray:
        return np.clip(features @ self.coef.T, 0.0, 1.0)

    def choose(self, features: np.ndarray) -> np.ndarray:
        """The drafter index each prompt is decoded with."""
        return np.argmax(chain_speedup(self.alpha(features), self.ratios[None, :]), axis=1)


def align(primary: TraceSet, other: TraceSet, name: str) -> TraceSet:
    """``other``'s traces of ``primary``'s prompts, in its order; one error line where that cannot be."""
    for key, what in (("target", "target"), ("temperature", "temperature")):
        if getattr(primary.meta, key) != getattr(other.meta, key):
            raise SimspecError(f"drafter profile {name} has traces for {what} {getattr(other.meta, key)!r}, but the "
                               f"main profile's are for {getattr(primary.meta, key)!r}: selection compares drafters of "
                               f"one target at one temperature")
    where = {p: i for i, p in enumerate(other.meta.prompt_ids or [])}
    wanted = list(primary.meta.prompt_ids or [])
    missing = [p for p in wanted if p not in where]
    if not wanted or missing:
        raise SimspecError(f"drafter profile {name} has no traces of {len(missing) or 'the'} prompt(s) of the main "
                           f"profile's traces (e.g. {(missing or ['?'])[0]}): record every drafter on the same "
                           f"--prompts and --n-prompts")
    return other.subset(np.array([where[p] for p in wanted]))


@dataclass(frozen=True)
class Selection:
    """What ``compare`` found: per scored prompt, each drafter's replay and the choices."""

    drafters: tuple[Drafter, ...]
    results: tuple[ReplayResult, ...]  # per drafter, on the scored prompts
    trees: tuple[str, ...]  # per drafter, the static tree it decodes with
    fixed: int  # the drafter best on average over the train prompts
    chosen: np.ndarray  # [scored prompts] seed 003's choice
    hindsight: np.ndarray  # [scored prompts] the best drafter per prompt, in hindsight
    alpha_error: np.ndarray  # [drafters] mean |predicted - measured α| on the scored prompts
    decision_seconds: float  # per prompt: features and the choice

    def pick(self, choice: np.ndarray, extra_seconds: float = 0.0) -> ReplayResult:
        """One replay result made of each prompt's chosen drafter's (its time plus ``extra_seconds``)."""
        rows = np.arange(len(choice))
        picked = {f.name: np.stack([getattr(r, f.name) for r in self.results])[choice, rows]
                  for f in fields(ReplayResult)}
        picked["seconds"] = picked["seconds"] + extra_seconds
        return ReplayResult(**picked)


def compare(drafters: list[Drafter], train: np.ndarray, scored: np.ndarray, max_new_tokens: int | None) -> Selection:
    """Seed 003's selection fitted on the ``train`` prompts and scored on ``scored`` (indices)."""
    from simspec.sim.evaluate import grid_best

    own_train = [d.traces.subset(train) for d in drafters]
    policies = [grid_best(t, d.cost, max_new_tokens) for t, d in zip(own_train, drafters)]
    fixed = int(np.argmax([np.mean(replay(t, d.cost, p, max_new_tokens).speedup)
                           for t, d, p in zip(own_train, drafters, policies)]))
    results = [replay(d.traces.subset(scored), d.cost, p, max_new_tokens) for d, p in zip(drafters, policies)]
    primary = drafters[0].traces
    alpha = np.stack([single_token_accuracy(d.traces) for d in drafters], axis=1)
    context = float(np.median(primary.context_length))
    ratios = [cost_ratio(d.cost, d.traces.width, context) for d in drafters]
    selector = DraftSelector.fit(prompt_features(primary.subset(train)), alpha[train], np.asarray(ratios))
    started = time.perf_counter()  # the decision: the scored prompts' features, then the choice
    features = prompt_features(primary.subset(scored))
    chosen = selector.choose(features)
    decision = (time.perf_counter() - started) / max(len(scored), 1)
    speedups = np.stack([r.speedup for r in results])
    return Selection(tuple(drafters), tuple(results), tuple(p.name for p in policies), fixed, chosen,
                     np.argmax(speedups, axis=0), np.abs(selector.alpha(features) - alpha[scored]).mean(0), decision)
