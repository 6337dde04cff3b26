"""docs/findings.md "Decision time by depth": what charging every cycle's decisions at the traces'
deepest tree (every profile calibrated before ``policy_seconds_by_depth``) did to the simulator's
speedups of the rules that stop drafting early.

For each profile named (default: the shipped CPU profiles at T = 0 and T = 1): the baselines'
decisions timed on this machine at the depths ``calibrate`` times (``policy_latency_by_depth``);
the baselines tuned on the train split (tuning does not read the charges); the held-out prompts
replayed twice, each cycle charged the deepest tree's decision time, then its own depth's. Both
charges come from this machine's one timing, so the difference is the depth alone. Run it alone.

    .venv/bin/python research/scripts/decision-by-depth.py > research/runs/findings/decision-by-depth.json
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

from simspec.machine import device_model
from simspec.policies.registry import timing_policies
from simspec.policies.timing import policy_latency_by_depth
from simspec.sim.charge import DecisionCharge
from simspec.sim.evaluate import evaluate, method_set, split_traces
from simspec.sim.profile import load_profile

RUNS = (("calibration/cpu-demo", "grid,ddd,svip,gammatune,specdecpp,disco,c2t,bayes"),
        ("calibration/cpu-demo-T1", "grid,svip,c2t,bayes"))


def main(runs=RUNS) -> None:
    out = {"machine": device_model("cpu"), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "statistic": "median speedup over held-out prompts", "profiles": []}
    for path, names in runs:
        started = time.perf_counter()
        profile = load_profile(path)
        traces = profile.traces()
        train, held = split_traces(traces, "train"), split_traces(traces, "heldout")
        methods, _, _ = method_set(names.split(","), [], profile, train, None)
        families = {m.family for m in methods}
        timed = policy_latency_by_depth({k: v for k, v in timing_policies(profile.cost, traces.width,
                                                                          traces.depth_max).items() if k in families},
                                        traces.width, traces.depth_max, 100)
        deepest = str(traces.depth_max)
        charges = {"deepest tree": {f: DecisionCharge.flat(t[deepest]) for f, t in timed.items()},
                   "own depth": {f: DecisionCharge.of(t) for f, t in timed.items()}}
        rows = {how: evaluate(held, profile.cost, methods, None, charged)[0] for how, charged in charges.items()}
        out["profiles"].append({
            "profile": path, "temperature": traces.temperature, "held_out_prompts": held.n_prompts,
            "decision_seconds_by_depth": timed,
            "methods": [{"method": a.name, "deepest_tree": a.speedup_median, "own_depth": b.speedup_median,
                         "change": b.speedup_median / a.speedup_median - 1, "draft_calls_per_cycle":
                         a.draft_calls / max(a.cycles, 1e-9)} for a, b in zip(rows["deepest tree"], rows["own depth"])],
            "seconds": round(time.perf_counter() - started, 1)})
        print(f"{path}: done in {out['profiles'][-1]['seconds']} s", file=sys.stderr)
    json.dump(out, sys.stdout, indent=1, default=lambda x: float(x) if isinstance(x, np.floating) else str(x))
    print()


if __name__ == "__main__":
    main()
