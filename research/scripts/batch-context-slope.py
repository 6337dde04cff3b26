"""How a plain step at batch B costs with the longest row's context, timed in interleaved rounds.

Under load the rows of a batch hold requests at different lengths; the replay prices a step at
the longest busy row's context on the profile's batch curve (measured with every row at that
context, block by block). This times, through the engine's own ``TargetRows``, a plain step at
batch B with (a) every row at L and (b) one row at L and the others at a short context, for
several L, every configuration once per round, and prints the medians beside the profile's price.

    .venv/bin/python research/scripts/batch-context-slope.py --profile calibration/cpu-sharegpt-batch --batch 4
"""

from __future__ import annotations

import argparse
import contextlib
import json

import numpy as np
import torch

from simspec.engine.batch_models import TargetRows
from simspec.engine.kv_rows import causal
from simspec.engine.modeling import head_logits
from simspec.measure.interleave import load_engine
from simspec.measure.profiler import time_interleaved
from simspec.sim.profile import load_profile


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="calibration/cpu-sharegpt-batch")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--contexts", default="64,256,512,1024,1536")
    ap.add_argument("--short", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=15)
    a = ap.parse_args()
    profile = load_profile(a.profile)
    engine, _ = load_engine(profile, [], 8, lambda text: contextlib.nullcontext())
    target = engine.target
    contexts = [int(c) for c in a.contexts.split(",")]
    vocab = target.model.config.vocab_size
    gen = torch.Generator().manual_seed(0)
    runs = {}
    with torch.inference_mode():
        for context in contexts:
            for mix in ("all", "one"):
                rows = TargetRows(target, a.batch, context + 8)
                for b in range(a.batch):
                    n = context if mix == "all" or b == 0 else min(a.short, context)
                    rows.prefill(b, torch.randint(100, vocab, (n,), generator=gen))
                one = (np.array([1000]), np.zeros(1, dtype=np.int64), causal(1))
                trees = dict.fromkeys(range(a.batch), one)

                def run(rows=rows, trees=trees) -> None:
                    hidden, _ = rows.forward(trees)
                    head_logits(rows.head, hidden[:, 0]).argmax(-1).cpu()

                runs[context, mix] = run
        timed = time_interleaved(runs, target.device, a.repeats)
    cost = profile.cost.at_batch(a.batch)
    for context in contexts:
        price = float(cost.greedy(context))
        row = {"context": context, "profile_ms": round(price * 1e3, 2)}
        for mix in ("all", "one"):
            row[f"{mix}_ms"] = round(float(np.median(timed[context, mix])) * 1e3, 2)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
