"""docs/validation.md#the-live-verify-curve-by-size: the live verify cost at every V from 4 to 12
against a profile's verify curve. Static trees (D 5, W 10) and plain greedy decoding on train
prompts, interleaved, order rotated per prompt, PASSES passes; prints live / profile per V for
each pass (their agreement is the noise) and the live milliseconds per verification.

    .venv/bin/python research/scripts/verify-by-size.py [PROFILE] [PROMPTS] [PASSES]   # ~6 min on the EPYC

Run it alone: it measures time."""
import contextlib
import sys

import numpy as np

from simspec.data import load_prompts
from simspec.measure.interleave import DriftMeter, load_engine
from simspec.policies.base import StaticPolicy
from simspec.sim.profile import load_live_profile

path, prompts, passes = (sys.argv[1:] + ["calibration/cpu-demo", "sharegpt", "2"][len(sys.argv) - 1:])[:3]
profile = load_live_profile(path, "the probe")
chosen = load_prompts(prompts, split="train", n=8)
engine, ids = load_engine(profile, [p.text for p in chosen], 48 + 12, lambda _: contextlib.nullcontext())
sizes = list(range(4, 13))
trees = [StaticPolicy(5, 10, v) for v in sizes]
engine.plain(ids[0], 8)  # warm-up
for tree in trees:
    engine.generate(ids[0], tree, 8)
passes_meters = []
for rep in range(int(passes)):
    meter = DriftMeter(profile.cost, 10)  # one per pass: their agreement is the noise
    for p, one in enumerate(ids):
        for slot in np.roll(np.arange(len(trees) + 1), -(p + rep)):
            if slot == 0:
                meter.greedy(engine.plain(one, 48))
            else:
                meter.speculative(engine.generate(one, trees[slot - 1], 48), trees[slot - 1].name)
    v, r = meter.ratios_by_size("verify")
    print(f"pass {rep}: live / profile, greedy step {meter.ratios()['greedy step']:.3f}; verify by V "
          + ", ".join(f"{a}: {b:.3f}" for a, b in zip(v, r)), flush=True)
    passes_meters.append(meter)
runs = [run for meter in passes_meters for run in meter.runs if run.method != "greedy"]
size = np.concatenate([run.cycles["size"] for run in runs])
verify = np.concatenate([run.measured["verify"] for run in runs])
print("cycles by V: " + ", ".join(f"{v}: {(size == v).sum()}" for v in np.unique(size)))
print("live ms per verification by V: "
      + ", ".join(f"{v}: {1e3 * verify[size == v].mean():.1f}" for v in np.unique(size)))
