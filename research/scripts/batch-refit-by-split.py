"""The in-situ refit at batch 4 on ShareGPT's 8 train prompts and on its 8 held-out prompts, in
turn, twice (train, held-out, train, held-out): their live / profile ratios side by side. A
probe of docs/results/batches.md#validation-at-batch-4-refitted-in-situ: a ratio that differs between
the two queues by more than the rounds differ is a cost the curves do not model.

Usage: .venv/bin/python research/scripts/batch-refit-by-split.py PROFILE (curves at batch 4).
Run it alone: it measures time."""

import sys
from contextlib import nullcontext

from simspec.data import load_prompts
from simspec.engine.speculative import SpeculativeEngine
from simspec.measure.insitu_batch import refit_batch
from simspec.measure.interleave import load_engine
from simspec.sim.profile import load_live_profile


def no_bar(*_args, **_kwargs):
    return lambda *_a, **_k: None


profile = load_live_profile(sys.argv[1], "probe")
train = load_prompts("sharegpt", split="train", n=8)
held = load_prompts("sharegpt", split="heldout", n=8)
engine, ids = load_engine(profile, [p.text for p in train + held], 60, lambda _text: nullcontext())
rows = SpeculativeEngine(engine.target, engine.drafter, batch_size=4)
sets = {"train": list(zip([p.id for p in train], ids[:8])), "heldout": list(zip([p.id for p in held], ids[8:]))}
for name in ("train", "heldout", "train", "heldout"):
    record = refit_batch(rows, profile, sets[name], 48, no_bar).record
    scales = record["scales"]
    print(name, record["live_over_profile"], "verify at V=2", scales["verify"].get(2),
          "bookkeeping at V=2", scales["bookkeeping"].get(2), flush=True)
