"""docs/simulator.md "How far a step's price moves the queue": the streams of a `simspec load
--live` JSON replayed again with every curve of the profile scaled by one factor (a machine a few
per cent faster or slower than calibrated), each metric's change against the unscaled replay.
Near saturation the queue amplifies the step's price: time to first token moves by many times
the factor, time per output token by about the factor. Nothing real enters it.

    .venv/bin/python research/scripts/load-sensitivity.py research/runs/load/sharegpt-B4-600s-norefit/load.json.gz

The profile is the run's own (its path inside the JSON); the streams are rebuilt as load-norefit.py does.
"""

from __future__ import annotations

import gzip
import json
import re
import sys

import numpy as np

from simspec.sim.evaluate import build_baselines, decision_charges, split_traces
from simspec.sim.load import DecisionCharge, replay_load
from simspec.sim.profile import cost_model, load_profile
from simspec.sim.stream import poisson

FACTORS = (0.90, 0.95, 1.0, 1.05, 1.10)
METRICS = ("tpot_p50_s", "ttft_p50_s", "throughput_tokens_per_s")
CURVES = ("greedy", "verify", "draft", "bookkeeping", "prefill")

path = sys.argv[1]
run = json.load(gzip.open(path) if path.endswith(".gz") else open(path))
profile = load_profile(run["profile"])
traces = profile.traces()
held, train = split_traces(traces, run["split"]), split_traces(traces, "train")
charges = decision_charges(profile.meta)
names = list(dict.fromkeys(r["method"] for r in run["rows"]))[1:]
specs = [re.sub(r"^static\(D=(\d+),W=\d+,V=(\d+)\)$", r"static:\1,\2", n) for n in names]
methods = [None, *build_baselines(specs, train, profile.cost, run["max_new_tokens"])]
costs = {f: cost_model(profile.samples, {c: f for c in CURVES}) for f in FACTORS}
for i, row in enumerate(run["rows"]):
    meta = row["stream"]
    stream = poisson(meta["rate"], meta["duration_s"], np.arange(held.n_prompts), meta["seed"])
    method = methods[i % len(methods)]
    charge = charges.get(method.family, DecisionCharge.flat(0.0)) if method else 0.0
    served = {f: replay_load(held, cost, method, stream, run["max_batch"], run["max_new_tokens"], charge, run["seed"],
                             padded=True).summary(run["tpot_target_s"]) for f, cost in costs.items()}
    base = served[1.0]
    print(json.dumps({"rate": meta["rate"], "method": base["method"], "requests": base["requests"],
                      "real_over_replay": {k: round(row["real"][k] / base[k] - 1, 4) for k in METRICS},
                      **{k: {f"{f:.2f}": round(served[f][k] / base[k] - 1, 4) for f in FACTORS} for k in METRICS}}))
