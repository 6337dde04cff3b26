"""Plain decoding at batch 4 of ShareGPT's 8 train prompts (the queue validate's --recalibrate refits
on) and of its 8 held-out prompts (the scored queue), interleaved, at T = 1 and T = 0, with the seeds
the refit and the scored passes use: each run's live / profile plain-step ratio against the
profile's curves at 4. A probe of docs/results/batches.md#validation-at-batch-4-sampled-at-t--1.

Usage: .venv/bin/python research/scripts/batch-plain-by-queue.py [PROFILE]
(default calibration/cpu-demo-T1-batch). Run it alone: it measures time."""

import contextlib
import sys

from simspec.data import load_prompts
from simspec.engine.sampling import GREEDY, Sampling
from simspec.engine.speculative import SpeculativeEngine
from simspec.measure.interleave import DriftMeter, load_engine
from simspec.sim.profile import load_profile

profile = load_profile(sys.argv[1] if len(sys.argv) > 1 else "calibration/cpu-demo-T1-batch")
train = load_prompts("sharegpt", split="train", n=8)
held = load_prompts("sharegpt", split="heldout", n=8)
engine, ids = load_engine(profile, [p.text for p in train + held], 60, lambda _: contextlib.nullcontext(),
                          Sampling(1.0))
queues = {"train": ids[:8], "held": ids[8:]}
print("prompt lengths", {name: [len(i) for i in q] for name, q in queues.items()})
cost = profile.cost.at_batch(4)
for label, sampling in (("T1", Sampling(1.0)), ("T0", GREEDY)):
    rows = SpeculativeEngine(engine.target, engine.drafter, sampling, batch_size=4)
    rows.decode(queues["train"][:4], None, 8)
    results: dict[str, list[str]] = {"train": [], "held": [], "held-seed1e6": []}
    for rep in range(4):
        for name, queue, first in (("train", "train", 1_000_000), ("held", "held", rep * 8),
                                   ("held-seed1e6", "held", 1_000_000)):
            meter = DriftMeter(cost, 10)
            run = rows.decode(queues[queue], None, 48, None if sampling.greedy else range(first, first + 8))
            meter.batch(run, plain=True)
            results[name].append(f"{meter.ratios()['greedy step']:.3f} ({run.tokens_per_s:.1f} tok/s)")
    for name, runs in results.items():
        print(label, name, "plain step live / profile:", ", ".join(runs), flush=True)
