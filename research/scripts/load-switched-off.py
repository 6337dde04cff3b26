"""docs/simulator.md, a cycle that drafts nothing: rules that switch speculation off (queue-aware,
TensorRT-LLM's schedule) against plain decoding at a saturating Poisson stream, on an analytic
profile with batch curves. Run it at two commits to compare their pricing of a switched-off cycle.

    .venv/bin/simspec calibrate --gpu h100 --traces-from calibration/traces-humaneval-eagle \\
        --batch-sizes 1,2,4,8,16,32,64 --out /tmp/prof-h100
    .venv/bin/python research/scripts/load-switched-off.py /tmp/prof-h100
"""

from __future__ import annotations

import sys

import numpy as np

from simspec.sim.evaluate import build_baselines, decision_charges, split_traces
from simspec.sim.load import replay_load
from simspec.sim.profile import load_profile
from simspec.sim.stream import poisson

profile = load_profile(sys.argv[1] if len(sys.argv) > 1 else "/tmp/prof-h100")
traces = profile.traces()
held = split_traces(traces, "heldout")
charges = decision_charges(profile.meta)
for name in ("queue-aware", "trtllm-schedule", None):
    method = build_baselines([name], split_traces(traces, "train"), profile.cost, 64)[0] if name else None
    for rate in (128, 256):
        stream = poisson(rate, 60, np.arange(held.n_prompts), 0)
        served = replay_load(held, profile.cost, method, stream, 64, 64, charges.get(method.family, 0.0) if method
                             else 0.0)
        print(f"{name or 'plain'} at {rate}/s: {served.throughput:.1f} tokens/s, TPOT p50 "
              f"{1e3 * np.median(served.tpot):.2f} ms")
