"""docs/simulator.md "Ten-minute streams of chat": the live rows of a `simspec load --live` JSON
predicted again by the profile itself, without the refit the run made (or with it: the run's
own numbers), priced as the live engine runs (every cycle at --max-batch rows). The streams are
rebuilt from the JSON (Poisson, same rates, duration and seed), so each prediction is of the
very requests the real engine served; nothing real enters the prediction.

    .venv/bin/python research/scripts/load-norefit.py research/runs/load/sharegpt-B4-600s/load.json [PROFILE]

PROFILE (default: the run's own) prices the same streams with another profile of the same traces.
"""

from __future__ import annotations

import json
import sys

from runs import load_streams

from simspec.measure.load import COMPARED
from simspec.sim.load import replay_load

BOUNDS = {"throughput_tokens_per_s": 0.05, "tpot_p50_s": 0.05, "tpot_p90_s": 0.10, "ttft_p50_s": 0.10}

# another profile of the same traces, or the run's own
run, profile, held, streams = load_streams(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
within = {k: 0 for k in COMPARED}
for row, stream, method, charge in streams:
    meta = row["stream"]
    served = replay_load(held, profile.cost, method, stream, run["max_batch"], run["max_new_tokens"], charge,
                         run["seed"], padded=True).summary(run["tpot_target_s"])
    real = row["real"]
    errors = {k: served[k] / real[k] - 1 for k in COMPARED}
    for k, e in errors.items():
        within[k] += abs(e) <= BOUNDS[k]
    print(json.dumps({"rate": meta["rate"], "method": served["method"], "requests": served["requests"],
                      "cycles": [real["cycles"], served["cycles"]],
                      "goodput": [real["goodput_requests_per_s"], served["goodput_requests_per_s"]],
                      "no_refit": {k: [round(real[k], 5), round(served[k], 5), round(errors[k], 4)] for k in COMPARED},
                      "refit_error": {k: round(row["rel_error"][k], 4) for k in COMPARED}}))
print(json.dumps({"within_bounds_no_refit": within, "rows": len(run["rows"])}))
