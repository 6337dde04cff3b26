"""The simulator's verbs: ``validate --simulated`` (replay every method on the profile's traces,
next to the hindsight oracle) and ``bench-sim`` (replay throughput). numpy only."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from simspec.sim.evaluate import BASELINES


@dataclass(frozen=True)
class SimulatedRequest:
    profile: str
    baselines: tuple[str, ...] = BASELINES
    policies: tuple[str, ...] = ()
    split: str = "heldout"
    max_new_tokens: int | None = None  # None: everything recorded
    temperature: float | None = None  # None: the profile's; else it must be the profile's


@dataclass
class Simulated:
    """What ``validate_simulated`` found: the ``--json`` line, the warnings met, the profile's
    label and the positions replayed."""

    summary: dict
    notes: list[str] = field(default_factory=list)
    label: str = ""
    positions: int = 0


def validate_simulated(request: SimulatedRequest, status: Callable[[str], object]) -> Simulated:
    """Tunes the baselines on the train split and replays every method on the chosen split."""
    from simspec.sim.evaluate import check_names, check_split, evaluate, method_set, split_traces
    from simspec.sim.profile import load_profile

    r = request
    split = check_split(r.split)
    check_names(list(r.baselines))
    loaded = load_profile(r.profile)
    loaded.require_temperature(r.temperature)
    started = time.perf_counter()
    with status("loading traces"):
        traces = loaded.traces()
    train = split_traces(traces, "train")
    scored = split_traces(traces, split)
    with status("tuning baselines on the train split and replaying"):
        methods, charged, notes = method_set(list(r.baselines), list(r.policies), loaded, train, r.max_new_tokens)
        rows, oracle_row, cycles_per_s = evaluate(scored, loaded.cost, methods, r.max_new_tokens, charged)
    summary = {
        "profile": r.profile, "split": split, "kind": loaded.kind, "device": loaded.meta["device"],
        "temperature": traces.temperature,
        "prompts": scored.n_prompts, "max_new_tokens": r.max_new_tokens,
        "traces_hash": traces.meta["content_hash"], "profile_hash": loaded.meta["inputs_hash"],
        "rows": [{"method": x.name, "speedup": x.speedup_median, "tau": x.tau, "oracle_share": x.share_of_oracle,
                  "draft_calls": x.draft_calls, **x.to_dict()} for x in rows],
        "oracle": oracle_row.to_dict(), "cycles_per_s": cycles_per_s, "seconds": time.perf_counter() - started,
    }
    return Simulated(summary, notes, loaded.label, scored.positions)


@dataclass(frozen=True)
class BenchSimRequest:
    profile: str
    copies: int = 200
    depth: int = 8
    size: int = 60
    repeats: int = 3
    temperature: float | None = None  # None: the profile's; else it must be the profile's


def bench_sim(request: BenchSimRequest) -> tuple[dict, int]:
    """Replays a static policy over ``copies`` copies of the profile's traces, ``repeats`` times,
    on one core; returns the summary (the ``--json`` line) and the traces' prompt count."""
    from simspec.policies import StaticPolicy
    from simspec.sim.evaluate import replay_throughput
    from simspec.sim.profile import load_profile

    r = request
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    loaded = load_profile(r.profile)
    loaded.require_temperature(r.temperature)
    traces = loaded.traces()
    if traces.sampled:
        traces.tails()  # built once, before the clock starts
    runs = [replay_throughput(traces, loaded.cost, StaticPolicy(r.depth, traces.width, r.size), r.copies)
            for _ in range(r.repeats)]
    rates = sorted(c / s for c, s in runs)
    return ({"profile": r.profile, "temperature": traces.temperature, "copies": r.copies, "depth": r.depth,
             "size": r.size, "cycles": runs[0][0], "cycles_per_s": rates[len(rates) // 2], "all_cycles_per_s": rates},
            traces.n_prompts)

