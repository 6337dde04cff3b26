"""docs/validation.md#which-statistic-which-refit: does a scored method's tree verify at the
cost of the ladder's static tree of the same V, and what does V = 60 (EAGLE-3's tree, between
the profile's grid points 56 and 64) cost? Static trees, EAGLE-3's tree and the Re-SpS policy,
interleaved on train prompts (order rotated per prompt and pass), their live verify times and
live / profile ratios. Times the engine: run it alone on the machine.

    .venv/bin/python research/scripts/verify-by-method.py [PROMPTS] [PASSES] [PROFILE]   # ~6 min
"""
import contextlib
import sys
import time

import numpy as np

from simspec.data import load_prompts
from simspec.measure.interleave import load_engine
from simspec.policies.artifact import load_policy
from simspec.policies.base import StaticPolicy, eagle3_default
from simspec.sim.profile import load_profile

prompt_set = sys.argv[1] if len(sys.argv) > 1 else "sharegpt"
passes = int(sys.argv[2]) if len(sys.argv) > 2 else 3
profile = load_profile(sys.argv[3] if len(sys.argv) > 3 else "calibration/cpu-demo")
prompts = load_prompts(prompt_set, split="train", n=6)
engine, ids = load_engine(profile, [p.text for p in prompts], 80, lambda s: contextlib.nullcontext())
methods = []
for d, w, v in ((8, 10, 64), (8, 10, 56), (7, 10, 32), (5, 10, 32), (4, 10, 8)):
    tree = StaticPolicy(d, w, v)
    tree.name = f"static(D={d},V={v})"
    methods.append(tree)
resps, _ = load_policy("policies/resps-cpu-demo")
resps.name = "resps-cpu-demo"
methods += [eagle3_default(), resps]
live = {m.name: [] for m in methods}
model = {m.name: [] for m in methods}
for m in methods:  # warm-up
    engine.generate(ids[0], m, 8, 0)
started = time.time()
for rep in range(passes):
    for i, prompt in enumerate(ids):
        for j in np.roll(np.arange(len(methods)), -(i + rep)):
            m = methods[j]
            run = engine.generate(prompt, m, 48, 0)
            context = len(prompt) + np.concatenate([[0], np.cumsum([c.accepted + 1 for c in run.cycles])[:-1]])
            live[m.name] += [c.verify_s for c in run.cycles]
            model[m.name] += list(np.asarray(profile.cost.verify([c.size for c in run.cycles], context), float))
print(f"{profile.directory}, {len(ids)} train prompts of {prompt_set}, {passes} passes, 48 new tokens, "
      f"{time.time() - started:.0f} s: live verify per tree")
for name in live:
    v, b = np.array(live[name]), np.array(model[name])
    print(f"{name:<20} {len(v):>4} cycles, median {np.median(v) * 1e3:6.1f} ms, mean {v.mean() * 1e3:6.1f} ms, "
          f"live / profile {v.sum() / b.sum():.3f}")
