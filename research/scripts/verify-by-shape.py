"""docs/validation.md#which-statistic-which-refit: does verification at a fixed size V cost more
for one tree shape than another? Static trees of the same V at different depths (width 10),
interleaved on train prompts (order reversed every other pass), their live verify times
compared. Times the engine: run it alone on the machine.

    .venv/bin/python research/scripts/verify-by-shape.py [PROFILE] [PROMPTS] [PASSES]   # ~5 min
"""
import contextlib
import sys

import numpy as np

from simspec.data import load_prompts
from simspec.measure.interleave import load_engine
from simspec.policies.base import StaticPolicy
from simspec.sim.profile import load_profile

profile = load_profile(sys.argv[1] if len(sys.argv) > 1 else "calibration/cpu-demo")
prompts = load_prompts(sys.argv[2] if len(sys.argv) > 2 else "humaneval", split="train", n=6)
passes = int(sys.argv[3]) if len(sys.argv) > 3 else 4
TREES = ((5, 10, 32), (7, 10, 32), (5, 10, 64), (8, 10, 64), (2, 10, 8), (4, 10, 8), (8, 10, 8))  # (D, W, V)
engine, ids = load_engine(profile, [p.text for p in prompts], 80, lambda s: contextlib.nullcontext())
verify = {t: [] for t in TREES}
for rep in range(passes):
    for prompt in ids:
        for tree in TREES if rep % 2 == 0 else TREES[::-1]:
            policy = StaticPolicy(*tree)
            policy.name = f"static(D={tree[0]},V={tree[2]})"
            verify[tree] += [c.verify_s for c in engine.generate(prompt, policy, 48, 0).cycles]
print(f"{profile.directory}, {len(ids)} train prompts, {passes} passes, 48 new tokens: live verify per tree")
for (d, _w, v), times in verify.items():
    print(f"V {v:>3} depth {d}: {len(times):>4} cycles, median {np.median(times) * 1e3:6.1f} ms, "
          f"mean {np.mean(times) * 1e3:6.1f} ms")
