"""Issue 49's information bound, first slice: the hindsight oracle, behaviour cloning of it from
the engine's observations (``simspec.sim.imitation``), the grid best and learned policies, side by
side on a profile's held-out traces (median speedup over prompts, every recorded token).

    .venv/bin/python scripts/results/information-bound.py calibration/cpu-demo policies/ltd-cpu-demo \
        > real/findings/information-bound-cpu-demo.json
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

from simspec.policies.artifact import load_policy
from simspec.sim.evaluate import grid_best, split_traces
from simspec.sim.imitation import fit_imitation, oracle_cycles
from simspec.sim.oracle import oracle
from simspec.sim.profile import load_profile
from simspec.sim.replay import replay


def main(profile_path: str, policy_paths: list[str]) -> None:
    profile = load_profile(profile_path)
    traces, cost = profile.traces(), profile.cost
    train, held = split_traces(traces, "train"), split_traces(traces, "heldout")
    started = time.perf_counter()
    imitation = fit_imitation(train, cost)
    fit_s = time.perf_counter() - started
    cycles = oracle_cycles(train, cost)
    rows = {"oracle": oracle(held, cost).speedup, imitation.name: replay(held, cost, imitation).speedup}
    grid = grid_best(train, cost, None)
    rows[grid.name] = replay(held, cost, grid).speedup
    for path in policy_paths:
        policy, _ = load_policy(path)
        rows[path] = replay(held, cost, policy).speedup
    top = float(np.median(rows["oracle"]))
    print(json.dumps({
        "profile": profile_path, "device": profile.meta.device, "heldout_prompts": held.n_prompts,
        "train_oracle_cycles": len(cycles.at), "oracle_depths": np.bincount(cycles.depth).tolist(),
        "imitation_fit_seconds": round(fit_s, 1),
        "rows": [{"method": k, "speedup": float(np.median(v)), "q25": float(np.percentile(v, 25)),
                  "q75": float(np.percentile(v, 75)), "share_of_oracle": float(np.median(v)) / top}
                 for k, v in rows.items()]}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
