"""docs/validation.md#the-live-verify-curve-by-size: the live verify cost at every V from 4 to 12
against a profile's verify curve. Static trees (D 5, W 10) and plain greedy decoding on train
prompts, interleaved, order rotated per prompt, PASSES passes; prints live / profile per V for
each pass (their agreement is the noise) and the live milliseconds per verification.

    .venv/bin/python scripts/results/verify-by-size.py [PROFILE] [PROMPTS] [PASSES]   # ~6 min on the EPYC

Run it alone: it measures time."""
import contextlib
import sys
from collections import defaultdict

import numpy as np

from simspec.data import load_prompts
from simspec.measure.interleave import load_engine
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
live, predicted, cycles = defaultdict(float), defaultdict(float), defaultdict(int)
greedy_live = greedy_predicted = 0.0
for rep in range(int(passes)):
    for p, one in enumerate(ids):
        for slot in np.roll(np.arange(len(trees) + 1), -(p + rep)):
            if slot == 0:
                run = engine.plain(one, 48)
                greedy_live += sum(c.verify_s for c in run.cycles)
                greedy_predicted += float(np.sum(profile.cost.greedy(run.prompt_length + np.arange(len(run.cycles)))))
                continue
            run = engine.generate(one, trees[slot - 1], 48)
            emitted = np.array([c.accepted for c in run.cycles]) + 1
            contexts = run.prompt_length + np.concatenate([[0], np.cumsum(emitted)[:-1]])
            for cycle, context in zip(run.cycles, contexts):
                live[cycle.size] += cycle.verify_s
                predicted[cycle.size] += float(profile.cost.verify(cycle.size, context))
                cycles[cycle.size] += 1
    print(f"pass {rep}: live / profile, greedy step {greedy_live / greedy_predicted:.3f}; verify by V "
          + ", ".join(f"{v}: {live[v] / predicted[v]:.3f}" for v in sorted(live)), flush=True)
print("cycles by V: " + ", ".join(f"{v}: {n}" for v, n in sorted(cycles.items())))
print("live ms per verification by V: " + ", ".join(f"{v}: {1e3 * live[v] / cycles[v]:.1f}" for v in sorted(live)))
