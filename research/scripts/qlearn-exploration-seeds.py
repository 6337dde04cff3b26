"""How far Q-learning's exploration draws alone move a queue's replayed speedup.

    python research/scripts/qlearn-exploration-seeds.py [PROFILE] [BATCH]

Replays one queue of 8 train-split prompts of PROFILE's traces (default calibration/cpu-demo-T1-batch,
batch 4, 48 new tokens) with ``qlearn`` (ε 0.1, as ``--baselines qlearn`` builds it) under twelve
exploration seeds, one acceptance draw each, beside ``fsm`` (no random numbers of its own), and
prints each seed's speedup and draft forwards. The spread is what a replay averaging over
exploration seeds would miss of one engine run, whose sequences meet one seed's draws
(docs/simulator.md#a-policys-own-random-numbers). numpy only."""

from __future__ import annotations

import sys

import numpy as np

from simspec.sim.evaluate import build_baselines, split_traces
from simspec.sim.profile import load_profile
from simspec.sim.replay import replay

path = sys.argv[1] if len(sys.argv) > 1 else "calibration/cpu-demo-T1-batch"
batch = int(sys.argv[2]) if len(sys.argv) > 2 else 4
profile = load_profile(path)
train = split_traces(profile.traces(), "train")
queue = np.arange(min(8, train.n_prompts))
print(f"{path}, batch {batch}, one queue of {len(queue)} train prompts, 48 new tokens, one acceptance draw per seed")
print("| method | seed | speedup | draft forwards | cycles |")
print("| --- | ---: | ---: | ---: | ---: |")
for name in ("qlearn", "fsm"):
    method = build_baselines([name], train, profile.cost.at_batch(batch), 48)[0]
    speedups = []
    for seed in range(12):
        method.seed = seed  # qlearn's exploration streams; fsm has none
        r = replay(train, profile.cost, method, 48, 0.0, 100 + seed, queue, draws=1, batch=batch)
        speedups.append(r.set_speedup)
        print(f"| {method.name} | {seed} | {r.set_speedup:.3f} | {int(r.draft_calls.sum())} | {int(r.cycles.sum())} |")
    print(f"| {method.name} | all | {min(speedups):.3f}-{max(speedups):.3f} (median {np.median(speedups):.3f}) | | |")
