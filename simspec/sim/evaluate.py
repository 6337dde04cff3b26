"""Simulated evaluation: baselines built and tuned on training traces, scored on held-out ones,
every method shown as a share of the hindsight oracle."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from functools import cache

import numpy as np

from simspec.errors import SimspecError
from simspec.policies.base import BatchPolicy, StaticPolicy, tree_capacities
from simspec.policies.registry import (
    BASELINE_REGISTRY,
    PROMPT_LEVEL,
    RuleContext,
    baseline,
    baseline_names,
    unknown_baseline,
)
from simspec.sim.charge import DecisionCharge
from simspec.sim.costmodel import CostModel
from simspec.sim.oracle import oracle
from simspec.sim.replay import ReplayResult, mean_speedup, replay
from simspec.sim.traces import TraceSet

SPLITS = ("heldout", "train", "all")
GRID_DEPTHS = tuple(range(1, 13))
GRID_SIZES = (1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 60, 80, 96, 128, 160, 200, 240)


def check_split(split: str) -> str:
    """``split`` if it names a prompt split (``--split``), else a one-line error."""
    if split not in SPLITS:
        raise SimspecError(f"--split must be heldout, train or all, got {split!r}")
    return split


def methods_flag(text: str, flag: str) -> tuple[str, ...]:
    """``--baselines``' parse: comma-separated methods; ``static:D,V`` keeps its comma (or ``static:DxV``)."""
    return tuple(m.strip() for m in re.findall(r"\s*static:\s*\d+\s*(?:[,x]\s*\d+)?|[^,]+", text) if m.strip())


def check_names(names: list[str], prompt_level: bool = True) -> None:
    """Every name is a registered baseline, ``static:…`` or (``prompt_level``) a per-prompt
    method (checked before any traces load)."""
    known = baseline_names() + (PROMPT_LEVEL if prompt_level else ())
    unknown = [n for n in names if n not in known and not n.startswith("static:")]
    if unknown:
        raise SimspecError(unknown_baseline(unknown[0], prompt_level))


def split_traces(traces: TraceSet, split: str) -> TraceSet:
    """The traces of one prompt split (``all`` keeps everything)."""
    if split == "all":
        return traces
    chosen = np.flatnonzero(np.array(traces.meta.splits or []) == split)
    if len(chosen) == 0:
        raise SimspecError(f"the traces hold no {split!r} prompts: record more prompts or use --split all")
    return traces.subset(chosen)


def static_surface(traces: TraceSet, cost: CostModel, max_new_tokens: int | None,
                   depths=GRID_DEPTHS, sizes=GRID_SIZES, distinct: bool = False) -> dict[tuple[int, int], ReplayResult]:
    """Every static (D, V) of the grid, replayed (a V past the tree's node count shares the capped
    V's replay; ``distinct``: only the capped cells); the distinct cells replay together, as one
    batch of (cell, prompt) queues."""
    keys = {(d, s): (d, int(min(s, tree_capacities(d, traces.width))))
            for d in depths if d <= traces.depth_max for s in sizes}
    cells = sorted(set(keys.values()))
    if not cells:
        return {}
    n = traces.n_prompts
    grid = _StaticGrid(np.repeat([c[0] for c in cells], n), np.repeat([c[1] for c in cells], n), traces.width)
    every = replay(traces, cost, grid, max_new_tokens, prompts=np.tile(np.arange(n), len(cells)))
    split = {cell: every.take(slice(i * n, (i + 1) * n)) for i, cell in enumerate(cells)}
    return split if distinct else {key: split[cell] for key, cell in keys.items()}


def tree_surface(train: TraceSet, cost: CostModel, max_new_tokens: int | None, chain: bool) -> dict:
    """The static trees ``tune`` ranks, (D, V) -> its replay on ``train``: every chain (V = D) if
    ``chain``, else the grid's distinct trees."""
    if chain:
        return {(d, d): replay(train, cost, StaticPolicy(d, train.width, d), max_new_tokens)
                for d in GRID_DEPTHS if d <= train.depth_max}
    return static_surface(train, cost, max_new_tokens, distinct=True)


def ranking(surface: dict) -> list[tuple[int, int]]:
    """The surface's trees, fastest first (mean speedup over prompts; ties: the smaller tree)."""
    return sorted(surface, key=lambda k: (-mean_speedup(surface[k]), k[1], k[0]))


class _StaticGrid(BatchPolicy):
    """Static trees, one per replay row: the grid's cells side by side."""

    def __init__(self, depth: np.ndarray, size: np.ndarray, width: int) -> None:
        self.depth, self.size, self.width, self.name = depth, size, width, "static grid"

    def plan_batch(self, rows: np.ndarray, context: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows = rows % len(self.depth)  # at T > 0 replay tiles the rows once per draw
        return self.depth[rows], self.size[rows]


def grid_best(train: TraceSet, cost: CostModel, max_new_tokens: int | None) -> StaticPolicy:
    surface = static_surface(train, cost, max_new_tokens)
    depth, size = max(surface, key=lambda k: (mean_speedup(surface[k]), -k[1]))  # ties: the smaller V
    return grid_policy(depth, train.width, int(min(size, tree_capacities(depth, train.width))))


def grid_policy(depth: int, width: int, size: int) -> StaticPolicy:
    """The static tree a grid search chose, named and charged as the grid-best baseline."""
    policy = StaticPolicy(depth, width, size, f"grid-best(D={depth},V={size})")
    policy.family = "grid"
    return policy


def build_baselines(names: list[str], train: TraceSet, cost: CostModel, max_new_tokens: int | None,
                    size: int | None = None) -> list[BatchPolicy]:
    """Baselines by name (``simspec.policies.registry``); tunable ones are tuned on ``train``.
    Depth rules verify ``size`` nodes (default: the grid-best static size, so that they differ
    from it only in depth)."""
    check_names(names)
    specs = {n: baseline(n) for n in names if not n.startswith("static:")}
    for spec in specs.values():
        if spec.needs_prompt_tokens and not train.has_prompt_tokens:
            raise SimspecError(f"{spec.name} reads the prompts' tokens, and these traces hold none (recorded before "
                               "traces stored them): record them again (`simspec calibrate --traces-only ... "
                               "--force`) or add the tokens with `simspec migrate-traces --traces FOLDER`")
    from simspec.policies.rules.sequoia import split_acceptance
    from simspec.sim.labels import WHOLE_TREE, fit_node_predictor, fit_predictor

    # Each fitted or searched on first use (the grid search replays every static tree).
    best = cache(lambda: grid_best(train, cost, max_new_tokens))
    if not size and any(spec.sized for spec in specs.values()):
        size = best().plan_batch(np.zeros(1, dtype=np.int64), np.zeros(1))[1][0]
    trained = cache(lambda: fit_predictor(train, size))  # one classifier for both stopping rules
    node_classifier = cache(lambda top: fit_node_predictor(train, top))  # C2T's (the best 64) and Bayes's

    def score(policy: BatchPolicy) -> float:  # tuning: the mean speedup on the train split
        return mean_speedup(replay(train, cost, policy, max_new_tokens))

    ctx = RuleContext(train.width, train.depth_max, size, int(np.median(train.context_length)), cost, trained, best,
                      lambda by_depth: split_acceptance(train, by_depth), lambda: node_classifier(64),
                      lambda: node_classifier(WHOLE_TREE))
    out = []
    for name in names:
        if name.startswith("static:"):
            try:
                d, v = (int(x) for x in re.split(r"[,x]", name.split(":", 1)[1]))
            except ValueError:
                raise SimspecError(f"bad baseline {name!r}: write static:D,V, e.g. static:5,8") from None
            policy = StaticPolicy(d, train.width, v)
        else:
            policy = specs[name].build(ctx, score)
        policy.family = "static" if name.startswith("static:") else name
        out.append(policy)
    return out


def decision_charges(meta) -> dict[str, DecisionCharge]:
    """What each baseline family's decisions cost per cycle, as the profile measured them: by depth
    (``policy_seconds_by_depth``), else flat (``policy_seconds``); static trees pay the 'static' entry."""
    charged = {name: DecisionCharge.flat(s) for name, s in (meta.policy_seconds or {}).items()}
    charged |= {name: DecisionCharge.of(timed) for name, timed in (meta.policy_seconds_by_depth or {}).items()}
    return {**charged, **{s.name: charged.get(s.charged_as, DecisionCharge.flat(0.0))
                          for s in BASELINE_REGISTRY.specs() if s.charged_as}}


def method_set(names: list[str], policy_paths: list[str], profile, train: TraceSet, max_new_tokens: int | None
               ) -> tuple[list[BatchPolicy], dict[str, DecisionCharge], list[str]]:
    """The methods a validation scores, the decision seconds to charge each family, and the warnings met."""
    import warnings

    from simspec.policies.artifact import ProfileMismatch, load_policy

    charged = decision_charges(profile.meta)
    learned, notes = [], []
    for path in policy_paths:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ProfileMismatch)
            policy, meta = load_policy(path, profile.meta.inputs_hash)
        notes += [str(w.message) for w in caught]
        charged[policy.family] = DecisionCharge.flat(meta.decision_seconds or 0.0)  # timed at its own depth
        learned.append(policy)
    methods = build_baselines(names, train, profile.cost, max_new_tokens) if names else []
    missing = {p.family: p for p in methods if p.family not in charged and p.family != "static"}
    if missing:  # a family newer than the profile: its decisions timed now, on this machine
        from simspec.policies.timing import policy_latency_by_depth

        charged |= {name: DecisionCharge.of(timed) for name, timed in
                    policy_latency_by_depth(missing, train.width, train.depth_max, 200).items()}
        notes.append(f"decision time of {', '.join(sorted(missing))} measured now on this machine: the profile "
                     f"predates {'them' if len(missing) > 1 else 'it'}")
    return methods + learned, charged, notes


@dataclass(frozen=True)
class MethodReport:
    name: str
    speedup_median: float
    speedup_q25: float
    speedup_q75: float
    speedup_mean: float
    tau: float
    cycles: float
    draft_calls: float
    share_of_oracle: float  # median over prompts of oracle time / method time

    def to_dict(self) -> dict:
        """JSON-safe: quantities that do not apply (the oracle's τ) become null, not NaN."""
        return {k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in self.__dict__.items()}


def report(name: str, result: ReplayResult, oracle_seconds: np.ndarray, oracle_prefill: np.ndarray) -> MethodReport:
    q25, med, q75 = np.percentile(result.speedup, [25, 50, 75])
    share = (oracle_seconds + oracle_prefill) / (result.seconds + result.prefill_seconds)
    return MethodReport(name, float(med), float(q25), float(q75), float(np.mean(result.speedup)),
                        float(np.sum(result.tokens) / np.sum(result.cycles)), float(np.mean(result.cycles)),
                        float(np.mean(result.draft_calls)), float(np.median(share)))


def evaluate(traces: TraceSet, cost: CostModel, policies: list[BatchPolicy], max_new_tokens: int | None,
             decision_seconds: dict[str, DecisionCharge | float] | None = None
             ) -> tuple[list[MethodReport], MethodReport, float]:
    """Each policy's report, the oracle's, and the replay's cycles per second; ``decision_seconds[family]``
    is charged per cycle (static trees: the 'static' entry)."""
    best = oracle(traces, cost, max_new_tokens)
    rows, cycles, seconds = [], 0, 0.0
    for policy in policies:
        started = time.perf_counter()
        result = replay(traces, cost, policy, max_new_tokens, (decision_seconds or {}).get(policy.family, 0.0))
        seconds += time.perf_counter() - started
        cycles += int(result.cycles.sum())
        rows.append(report(policy.name, result, best.seconds, best.prefill_seconds))
    q25, med, q75 = np.percentile(best.speedup, [25, 50, 75])
    oracle_row = MethodReport("oracle (hindsight)", float(med), float(q25), float(q75), float(np.mean(best.speedup)),
                              float("nan"), float("nan"), float("nan"), 1.0)
    return rows, oracle_row, cycles / max(seconds, 1e-9)


def replay_throughput(traces: TraceSet, cost: CostModel, policy: BatchPolicy, copies: int,
                      max_new_tokens: int | None = None) -> tuple[int, float]:
    """(cycles, seconds) of one replay over ``copies`` copies of every trace prompt."""
    tiled = np.tile(np.arange(traces.n_prompts), copies)
    started = time.perf_counter()
    result = replay(traces, cost, policy, max_new_tokens, prompts=tiled, draws=1)
    return int(result.cycles.sum()), time.perf_counter() - started
