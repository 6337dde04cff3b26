"""Simulated evaluation: baselines built and tuned on training traces, scored on held-out ones,
every method shown as a share of the hindsight oracle."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import numpy as np

from simspec.errors import SimspecError
from simspec.policies.base import BatchPolicy, StaticPolicy, eagle3_default, tree_capacities
from simspec.policies.baselines import (DDD, FSM, SVIP, AnalyticWindow, GammaTune, PaperQLearning, QLearning,
                                        TokenCacheFSM)
from simspec.policies.stopping import AcceptancePredictor, DiscoStop, SpecDecPP
from simspec.sim.costmodel import CostModel
from simspec.sim.oracle import oracle
from simspec.sim.replay import ReplayResult, replay
from simspec.sim.traces import TraceSet

SPLITS = ("heldout", "train", "all")
BASELINES = ("eagle3", "grid", "ddd", "svip", "gammatune", "analytic", "fsm", "cachefsm", "cachefsm-token", "qlearn",
             "qlearn-paper", "specdecpp", "disco")
# Methods that choose per prompt rather than per cycle (``validate --simulated`` scores them itself).
PROMPT_LEVEL = ("select",)
GRID_DEPTHS = tuple(range(1, 13))
GRID_SIZES = (1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 60, 80, 96, 128, 160, 200, 240)


def check_split(split: str) -> str:
    """``split`` if it names a prompt split (``--split``), else a one-line error."""
    if split not in SPLITS:
        raise SimspecError(f"--split must be heldout, train or all, got {split!r}")
    return split


def parse_names(text: str) -> list[str]:
    """A comma-separated list of methods; ``static:D,V`` keeps its own comma (``static:DxV``
    is accepted too)."""
    return [m.strip() for m in re.findall(r"\s*static:\s*\d+\s*(?:[,x]\s*\d+)?|[^,]+", text) if m.strip()]


def check_names(names: list[str]) -> None:
    """Every name is a known baseline (checked before any traces load)."""
    unknown = [n for n in names if n not in BASELINES + PROMPT_LEVEL and not n.startswith("static:")]
    if unknown:
        raise SimspecError(f"unknown baseline {unknown[0]!r}: choose from {', '.join(BASELINES + PROMPT_LEVEL)} or "
                           "static:D,V")


def split_traces(traces: TraceSet, split: str) -> TraceSet:
    """The traces of one prompt split (``all`` keeps everything)."""
    if split == "all":
        return traces
    splits = np.array(traces.meta.get("splits") or [])
    chosen = np.flatnonzero(splits == split)
    if len(chosen) == 0:
        raise SimspecError(f"the traces hold no {split!r} prompts: record more prompts or use --split all")
    return traces.subset(chosen)


def static_surface(traces: TraceSet, cost: CostModel, max_new_tokens: int | None,
                   depths=GRID_DEPTHS, sizes=GRID_SIZES) -> dict[tuple[int, int], ReplayResult]:
    """Every static (D, V) of the grid, replayed; a V past the tree's node count verifies the
    whole tree, so such cells share one replay with the capped V."""
    distinct: dict[tuple[int, int], ReplayResult] = {}
    out = {}
    for depth in depths:
        if depth > traces.depth_max:
            continue
        for size in sizes:
            key = (depth, int(min(size, tree_capacities(depth, traces.width))))
            if key not in distinct:
                distinct[key] = replay(traces, cost, StaticPolicy(depth, traces.width, key[1]), max_new_tokens)
            out[(depth, size)] = distinct[key]
    return out


def _score(result: ReplayResult) -> float:
    return float(np.mean(result.speedup))


def grid_best(train: TraceSet, cost: CostModel, max_new_tokens: int | None) -> StaticPolicy:
    surface = static_surface(train, cost, max_new_tokens)
    depth, size = max(surface, key=lambda k: (_score(surface[k]), -k[1]))  # ties: the smaller V
    return grid_policy(depth, train.width, int(min(size, tree_capacities(depth, train.width))))


def grid_policy(depth: int, width: int, size: int) -> StaticPolicy:
    """The static tree a grid search chose, named and charged as the grid-best baseline."""
    policy = StaticPolicy(depth, width, size)
    policy.name, policy.family = f"grid-best(D={depth},V={size})", "grid"
    return policy


def _tuned(make, values, train: TraceSet, cost: CostModel, max_new_tokens: int | None) -> BatchPolicy:
    """The member of a one-parameter family that does best on the training traces."""
    return max((make(v) for v in values), key=lambda p: _score(replay(train, cost, p, max_new_tokens)))


def build_baselines(names: list[str], train: TraceSet, cost: CostModel, max_new_tokens: int | None,
                    size: int | None = None) -> list[BatchPolicy]:
    """Baselines by name; tunable ones are tuned on ``train``. Depth rules verify ``size``
    nodes (default: the grid-best static size, so that they differ from it only in depth)."""
    width = train.width
    check_names(names)
    if "cachefsm-token" in names and not train.has_prompt_tokens:
        raise SimspecError("cachefsm-token reads the prompts' tokens, and these traces hold none (recorded before "
                           "traces stored them): record them again (`simspec calibrate --traces-only ... --force`) or "
                           "add the tokens with scripts/add-prompt-tokens.py from the simspec repository")
    # The grid search replays every static tree: run it only when a requested baseline needs it.
    depth_rules = [n for n in names if n not in ("eagle3", "grid") and not n.startswith("static:")]
    best = grid_best(train, cost, max_new_tokens) if "grid" in names or (depth_rules and not size) else None
    if not size and best is not None:
        size = best.plan_batch(np.zeros(1, dtype=np.int64), np.zeros(1))[1][0]
    context = int(np.median(train.context_length))
    dmax = train.depth_max
    predictor: list[AcceptancePredictor] = []

    def trained() -> AcceptancePredictor:  # one classifier for both stopping rules, fitted on first use
        if not predictor:
            from simspec.sim.labels import fit_predictor

            predictor.append(fit_predictor(train, size))
        return predictor[0]

    makers = {
        "eagle3": lambda: _fit_width(eagle3_default(), width),
        "grid": lambda: best,
        "ddd": lambda: _tuned(lambda t: DDD(t, width, dmax, size), (0.05, 0.1, 0.2, 0.3, 0.5, 0.7), train, cost,
                              max_new_tokens),
        "svip": lambda: _tuned(lambda h: SVIP(h, width, dmax, size), (0.5, 1.0, 1.5, 2.0, 2.5, 3.0), train, cost,
                               max_new_tokens),
        "gammatune": lambda: GammaTune(0.5, width, dmax, size),
        "analytic": lambda: AnalyticWindow(cost, context, 8, width, dmax, size),
        "fsm": lambda: FSM(width, dmax, size),
        "cachefsm": lambda: FSM(width, dmax, size, patience=2),
        "cachefsm-token": lambda: TokenCacheFSM(width, dmax, size),
        "qlearn": lambda: QLearning(cost, context, width=width, max_depth=dmax, size=size),
        "qlearn-paper": lambda: PaperQLearning(cost, context, width=width, max_depth=dmax, size=size),
        "specdecpp": lambda: _tuned(lambda h: SpecDecPP(trained(), h, width, dmax, size),
                                    (0.3, 0.5, 0.7, 0.8, 0.9, 0.95), train, cost, max_new_tokens),
        "disco": lambda: _tuned(lambda t: DiscoStop(trained(), t, width, dmax, size),
                                (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9), train, cost, max_new_tokens),
    }
    out = []
    for name in names:
        if name.startswith("static:"):
            try:
                d, v = (int(x) for x in re.split(r"[,x]", name.split(":", 1)[1]))
            except ValueError:
                raise SimspecError(f"bad baseline {name!r}: write static:D,V, e.g. static:5,8") from None
            policy = StaticPolicy(d, width, v)
        else:
            policy = makers[name]()
        policy.family = "static" if name.startswith("static:") else name
        out.append(policy)
    return out


def decision_charges(profile_meta: dict) -> dict[str, float]:
    """Seconds per cycle that each baseline family's decisions cost, as the profile measured
    them (static trees, EAGLE-3's and the grid's included, pay the 'static' entry)."""
    charged = dict(profile_meta.get("policy_seconds") or {})
    return {**charged, "eagle3": charged.get("static", 0.0), "grid": charged.get("static", 0.0)}


def method_set(names: list[str], policy_paths: list[str], profile, train: TraceSet, max_new_tokens: int | None
               ) -> tuple[list[BatchPolicy], dict[str, float], list[str]]:
    """The methods a validation scores: baselines by name (tuned on ``train``) and learned
    policies from their folders; the decision seconds to charge each family; and the warnings
    met on the way (a policy trained on another profile)."""
    import warnings

    from simspec.policies.artifact import ProfileMismatch, load_policy

    charged = decision_charges(profile.meta)
    learned, notes = [], []
    for path in policy_paths:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ProfileMismatch)
            policy, meta = load_policy(path, profile.meta["inputs_hash"])
        notes += [str(w.message) for w in caught]
        charged[policy.family] = meta.get("decision_seconds", 0.0)
        learned.append(policy)
    methods = build_baselines(names, train, profile.cost, max_new_tokens) if names else []
    missing = {p.family: p for p in methods if p.family not in charged and p.family != "static"}
    if missing:  # a family newer than the profile: its decisions timed now, on this machine
        from simspec.policies.timing import policy_latency

        charged.update(policy_latency(missing, train.width, train.depth_max, 200))
        notes.append(f"decision time of {', '.join(sorted(missing))} measured now on this machine: the profile "
                     f"predates {'them' if len(missing) > 1 else 'it'}")
    return methods + learned, charged, notes


def timing_baselines(cost: CostModel, width: int, depth_max: int) -> dict[str, BatchPolicy]:
    """One untuned instance of every baseline family, for measuring decision time (which
    does not depend on tuned thresholds)."""
    return {
        "static": StaticPolicy(depth_max, width, 60), "ddd": DDD(0.3, width, depth_max, 60),
        "svip": SVIP(1.5, width, depth_max, 60), "gammatune": GammaTune(0.5, width, depth_max, 60),
        "analytic": AnalyticWindow(cost, 256, 8, width, depth_max, 60), "fsm": FSM(width, depth_max, 60),
        "cachefsm": FSM(width, depth_max, 60, patience=2), "qlearn": QLearning(cost, 256, width=width,
                                                                              max_depth=depth_max, size=60),
        "cachefsm-token": TokenCacheFSM(width, depth_max, 60),
        "qlearn-paper": PaperQLearning(cost, 256, width=width, max_depth=depth_max, size=60),
        "specdecpp": SpecDecPP(AcceptancePredictor.random(), 0.5, width, depth_max, 60),
        "disco": DiscoStop(AcceptancePredictor.random(), 0.3, width, depth_max, 60),
    }


def _fit_width(policy: StaticPolicy, width: int) -> StaticPolicy:
    if policy.width == width:
        return policy
    depth, size = policy._plan.depth, policy._plan.size
    fitted = StaticPolicy(depth, width, size)
    fitted.name = f"{policy.name}(W={width})"
    return fitted


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
             decision_seconds: dict[str, float] | None = None) -> tuple[list[MethodReport], MethodReport, float]:
    """Each policy's report, the oracle's, and the replay throughput (cycles per second).
    ``decision_seconds[family]`` is charged per cycle (static trees: the 'static' entry)."""
    decision_seconds = decision_seconds or {}
    best = oracle(traces, cost, max_new_tokens)
    rows, cycles, seconds = [], 0, 0.0
    for policy in policies:
        started = time.perf_counter()
        charge = decision_seconds.get(policy.family, 0.0)
        result = replay(traces, cost, policy, max_new_tokens, charge)
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
