"""validate --recalibrate's refit schedule at batch 4, T = 1, on ShareGPT's 8 train prompts
(refit_batch's ladder, plain decoding before every fourth tree and after the last, the refit's
seeds), alone in one process: each run's live / profile ratios in order, then three more plain
runs. A probe of docs/results/batches.md#validation-at-batch-4-sampled-at-t--1.

Usage: .venv/bin/python research/scripts/batch-refit-schedule.py [PROFILE]
(default calibration/cpu-demo-T1-batch). Run it alone: it measures time."""

import contextlib
import sys

from simspec.data import load_prompts
from simspec.engine.sampling import Sampling
from simspec.engine.speculative import SpeculativeEngine
from simspec.measure.insitu import ladder_trees
from simspec.measure.insitu_batch import PLAIN_EVERY, batch_ladder
from simspec.measure.interleave import DriftMeter, load_engine
from simspec.sim.profile import load_profile

profile = load_profile(sys.argv[1] if len(sys.argv) > 1 else "calibration/cpu-demo-T1-batch")
train = load_prompts("sharegpt", split="train", n=8)
engine, ids = load_engine(profile, [p.text for p in train], 60, lambda _: contextlib.nullcontext(), Sampling(1.0))
rows = SpeculativeEngine(engine.target, engine.drafter, Sampling(1.0), batch_size=4)
cost = profile.cost.at_batch(4)
trees = ladder_trees(profile.meta.traces.width, batch_ladder(profile, 4))
seeds = range(1_000_000, 1_000_008)
rows.decode(ids[:4], None, 8)
rows.decode(ids[:4], trees[len(trees) // 2], 8)


def timed(policy, label: str) -> None:
    meter = DriftMeter(cost, profile.meta.traces.width)
    run = rows.decode(ids, policy, 48, seeds)
    meter.batch(run, plain=policy is None)
    ratios = " ".join(f"{op} {r:.3f}" for op, r in meter.ratios().items())
    print(label, ratios, f"({run.tokens_per_s:.1f} tok/s)", flush=True)


for i, tree in enumerate(trees):
    if i % PLAIN_EVERY == 0:
        timed(None, f"{i} plain")
    timed(tree, f"{i} {tree.name}")
for i in range(4):
    timed(None, "after" if i else f"{len(trees)} plain")
