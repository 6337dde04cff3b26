"""docs/findings.md, speculation under load: on bursty streams, simspec's load-aware rule
(``queue-aware``: the grid-best tree while no request waits, plain decoding once one does)
against the best single static setting, in the simulator, paired over seeds.

    .venv/bin/python research/scripts/load-bursty.py [PROFILE] [SEEDS] [TPOT_TARGET_S] [BURST_RATE]

Each seed draws one bursty stream (Poisson at BURST_RATE, default 3, requests/s for 10 s, then
30 s of silence, for 20 minutes; held-out prompts) through 8 rows, every cycle at the measured batch size holding its
busy rows. The static settings: plain decoding and the static trees D x V for D in 2..6 and V in
(D, 2D, 4D) capped by the tree; the best is the one with the highest mean goodput (requests per
second meeting the TPOT target) over the seeds. Prints one JSON line per method (mean goodput,
throughput, p90 TPOT) and one with the paired comparison: per-seed goodput differences and the
Wilcoxon signed-rank p-value."""

from __future__ import annotations

import json
import sys

import numpy as np

from simspec.policies.base import StaticPolicy, tree_capacities
from simspec.policies.rules.serving import QueueAware
from simspec.sim.evaluate import grid_best, split_traces
from simspec.sim.load import replay_load
from simspec.sim.profile import load_profile
from simspec.sim.stream import bursty
from simspec.stats import paired_p


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else "calibration/cpu-demo-batch"
    seeds = range(int(sys.argv[2]) if len(sys.argv) > 2 else 10)
    target = float(sys.argv[3]) if len(sys.argv) > 3 else 0.1
    rate = float(sys.argv[4]) if len(sys.argv) > 4 else 3.0
    profile = load_profile(path)
    traces = profile.traces()
    held, train = split_traces(traces, "heldout"), split_traces(traces, "train")
    width = traces.width
    best_tree = grid_best(train, profile.cost, 64)
    statics = {"plain": None}
    for d in range(2, 7):
        for v in sorted({min(v, int(tree_capacities(d, width))) for v in (d, 2 * d, 4 * d)}):
            statics[f"static D={d} V={v}"] = (d, v)
    streams = [bursty(rate, 10, 30, 1200, np.arange(held.n_prompts), seed=s) for s in seeds]

    def serve(make) -> list:
        return [replay_load(held, profile.cost, make(), stream, 8, 64) for stream in streams]

    results = {name: serve(lambda dv=dv: None if dv is None else StaticPolicy(dv[0], width, dv[1]))
               for name, dv in statics.items()}
    results["queue-aware"] = serve(lambda: QueueAware(best_tree))
    goodput = {name: np.array([r.goodput(target) for r in runs]) for name, runs in results.items()}
    for name, runs in results.items():
        print(json.dumps({"method": name, "goodput_mean": float(goodput[name].mean()),
                          "throughput_mean": float(np.mean([r.throughput for r in runs])),
                          "tpot_p90_mean_s": float(np.mean([np.percentile(r.tpot, 90) for r in runs]))}))
    best_static = max(statics, key=lambda n: goodput[n].mean())
    diff = goodput["queue-aware"] - goodput[best_static]
    print(json.dumps({"profile": path, "seeds": len(streams), "tpot_target_s": target, "burst_rate": rate,
                      "grid_best": best_tree.name,
                      "best_static": best_static, "queue_aware_minus_best_static": diff.round(5).tolist(),
                      "mean_relative": float(diff.mean() / goodput[best_static].mean()),
                      "wilcoxon_p": paired_p(goodput["queue-aware"], goodput[best_static]),
                      "requests_per_stream": [len(s.arrival) for s in streams]}))


if __name__ == "__main__":
    main()
