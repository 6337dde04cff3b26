"""docs/simulator.md "How far a step's price moves the queue": the streams of a `simspec load
--live` JSON replayed again with every curve of the profile scaled by one factor (a machine a few
per cent faster or slower than calibrated), each metric's change against the unscaled replay.
Near saturation the queue amplifies the step's price: time to first token moves by many times
the factor, time per output token by about the factor. Nothing real enters it.

    .venv/bin/python research/scripts/load-sensitivity.py research/runs/load/sharegpt-B4-600s-norefit/load.json.gz

The profile is the run's own (its path inside the JSON); the streams are rebuilt by runs.load_streams.
"""

from __future__ import annotations

import json
import sys

from runs import load_streams

from simspec.sim.load import replay_load
from simspec.sim.profile import cost_model

FACTORS = (0.90, 0.95, 1.0, 1.05, 1.10)
METRICS = ("tpot_p50_s", "ttft_p50_s", "throughput_tokens_per_s")
CURVES = ("greedy", "verify", "draft", "bookkeeping", "prefill")

run, profile, held, streams = load_streams(sys.argv[1])
costs = {f: cost_model(profile.samples, {c: f for c in CURVES}) for f in FACTORS}
for row, stream, method, charge in streams:
    meta = row["stream"]
    served = {f: replay_load(held, cost, method, stream, run["max_batch"], run["max_new_tokens"], charge, run["seed"],
                             padded=True).summary(run["tpot_target_s"]) for f, cost in costs.items()}
    base = served[1.0]
    print(json.dumps({"rate": meta["rate"], "method": base["method"], "requests": base["requests"],
                      "real_over_replay": {k: round(row["real"][k] / base[k] - 1, 4) for k in METRICS},
                      **{k: {f"{f:.2f}": round(served[f][k] / base[k] - 1, 4) for f in FACTORS} for k in METRICS}}))
