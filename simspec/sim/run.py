"""The simulator's verbs: ``validate --simulated`` (replay every method on the profile's traces,
next to the hindsight oracle) and ``bench-sim`` (replay throughput). numpy only."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from simspec import flags
from simspec.errors import SimspecError
from simspec.flags import opt
from simspec.sim.evaluate import PROMPT_LEVEL


@dataclass(frozen=True, kw_only=True)
class SimulatedRequest:
    """``validate --simulated``: made by ``ValidateRequest.simulated``, whose fields hold the defaults."""

    profile: str
    baselines: tuple[str, ...]
    policies: tuple[str, ...]
    split: str
    max_new_tokens: int | None  # None: everything recorded
    temperature: float | None  # None: the profile's; else it must be the profile's
    drafters: tuple[str, ...]  # profiles of other drafters on the same prompts (``select``)


@dataclass
class Simulated:
    """What ``validate_simulated`` found: the ``--json`` line, the warnings met, the label, the positions."""

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
    per_cycle = [n for n in r.baselines if n not in PROMPT_LEVEL]
    selecting = len(per_cycle) < len(r.baselines)
    if selecting != bool(r.drafters):
        raise SimspecError("the 'select' baseline (seed 003's draft selection) and --drafters go together: name the "
                           "profiles of the other drafters, recorded on the same prompts, with --drafters P1,P2"
                           if selecting else "--drafters is read by the 'select' baseline only: add select to "
                           "--baselines")
    loaded = load_profile(r.profile)
    loaded.require_temperature(r.temperature)
    others = [load_profile(path) for path in r.drafters]
    started = time.perf_counter()
    with status("loading traces"):
        traces = loaded.traces()
    train, scored = split_traces(traces, "train"), split_traces(traces, split)
    with status("tuning baselines on the train split and replaying"):
        methods, charged, notes = method_set(per_cycle, list(r.policies), loaded, train, r.max_new_tokens)
        rows, oracle_row, cycles_per_s = evaluate(scored, loaded.cost, methods, r.max_new_tokens, charged)
    selection = None
    if selecting:
        with status("replaying every drafter and selecting one per prompt"):
            selected, selection = _select(loaded, traces, others, list(r.drafters), split, r.max_new_tokens)
        rows += selected
    summary = {
        "profile": r.profile, "split": split, "kind": loaded.kind, "device": loaded.meta.device,
        "runtime": loaded.runtime, "temperature": traces.temperature, "prompts": scored.n_prompts,
        "max_new_tokens": r.max_new_tokens,
        "traces_hash": traces.meta.content_hash, "profile_hash": loaded.meta.inputs_hash,
        "rows": [{"method": x.name, "speedup": x.speedup_median, "tau": x.tau,
                  "oracle_share": x.to_dict()["share_of_oracle"], "draft_calls": x.draft_calls, **x.to_dict()}
                 for x in rows],
        "oracle": oracle_row.to_dict(), "cycles_per_s": cycles_per_s, "seconds": time.perf_counter() - started,
    }
    if selection is not None:
        summary["selection"] = selection
    return Simulated(summary, notes, loaded.label, scored.positions)


def _select(loaded, traces, others, paths: list[str], split: str, max_new_tokens: int | None):
    """Seed 003's selection among the main profile's drafter and ``others``: its rows and ``selection`` block."""
    import dataclasses

    import numpy as np

    from simspec.sim.evaluate import report
    from simspec.sim.selection import PROMPT_FEATURES, Drafter, align, compare

    names = [loaded.meta.draft or "main"] + [o.meta.draft or p for o, p in zip(others, paths)]
    if len(set(names)) < len(names):
        raise SimspecError(f"--drafters must name profiles of other drafters than the main profile's and each "
                           f"other's (drafters: {', '.join(names)})")
    for other in others:
        other.require_temperature(loaded.temperature)
    drafters = [Drafter(names[0], str(loaded.directory), traces, loaded.cost)] + [
        Drafter(name, path, align(traces, o.traces(), path), o.cost) for name, o, path in zip(names[1:], others, paths)]
    splits = np.array(traces.meta.splits or [])
    train = np.flatnonzero(splits == "train")
    scored = np.arange(traces.n_prompts) if split == "all" else np.flatnonzero(splits == split)
    found = compare(drafters, train, scored, max_new_tokens)

    def row(name: str, result):
        return dataclasses.replace(report(name, result, result.seconds, result.prefill_seconds),
                                   share_of_oracle=float("nan"))

    made = [row(f"{tree}@{d.name}", res) for d, tree, res in zip(drafters, found.trees, found.results)]
    made += [row(f"fixed-best-drafter({names[found.fixed]})", found.results[found.fixed]),
             row("select(seed003)", found.pick(found.chosen, found.decision_seconds)),
             row("hindsight-drafter", found.pick(found.hindsight))]
    block = {"features": list(PROMPT_FEATURES), "fixed": names[found.fixed],
             "decision_seconds_per_prompt": found.decision_seconds,
             "drafters": [{"name": d.name, "profile": d.profile, "tree": tree, "alpha_mae": float(err),
                           "chosen": int(np.sum(found.chosen == i)),
                           "best_in_hindsight": int(np.sum(found.hindsight == i))}
                          for i, (d, tree, err) in enumerate(zip(drafters, found.trees, found.alpha_error))]}
    return made, block


@dataclass(frozen=True, kw_only=True)
class BenchSimRequest:
    profile: str = flags.profile()
    copies: int = opt(200, "Copies of every trace prompt replayed at once.", min=1)
    depth: int = opt(8, "Static tree depth D.", min=1)
    size: int = opt(60, "Static verified tokens V.", min=1)
    repeats: int = flags.repeats(3)
    # None: the profile's; else it must be the profile's
    temperature: float | None = flags.temperature(None)


def bench_sim(request: BenchSimRequest) -> tuple[dict, int]:
    """A static policy replayed over ``copies`` copies of the traces, ``repeats`` times: (summary, prompt count)."""
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
