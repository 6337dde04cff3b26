"""Issue 50: tokens per second of teacher-text generation (the target continuing corpus prompts,
``simspec.engine.greedy``) at batch 1 and at the corpus's batch, interleaved and repeated.

The same prompts (the first ``BATCH`` of the ``self`` pool, train split) are continued for 128
tokens at batch 1 and at batch ``BATCH``; tokens counted are generated tokens (past EOS too:
the time a batch spends). Median and range over ``REPEATS`` rounds, batch sizes alternating.

    .venv/bin/python scripts/results/teacher-generation.py > real/drafters/teacher-generation.json
"""

from __future__ import annotations

import json
import os
import random
import time

import torch

from simspec.distill.corpus import GENERATION_BATCH
from simspec.distill.sources import self_prompts
from simspec.engine.greedy import greedy_continuations
from simspec.engine.models import load_model
from simspec.machine import machine

BATCH = int(os.environ.get("BATCH", GENERATION_BATCH))
REPEATS = int(os.environ.get("REPEATS", 3))
NEW = 128


def main() -> None:
    target = load_model("smollm2-135m-instruct", dtype="fp32")
    prompts = self_prompts(target.tokenizer, "self", 10**9, 384, NEW, "train", random.Random(0))[:BATCH]
    runs: dict[int, list[float]] = {1: [], BATCH: []}
    for _ in range(REPEATS):
        for batch in (1, BATCH):
            chosen = prompts if batch == BATCH else prompts[: max(2, BATCH // 8)]
            started = time.perf_counter()
            greedy_continuations(target, chosen, NEW, batch)
            runs[batch].append(len(chosen) * NEW / (time.perf_counter() - started))
    print(json.dumps({"machine": machine(), "torch_threads": torch.get_num_threads(), "dtype": "fp32",
                      "new_tokens": NEW, "prompts_at_batch_1": max(2, BATCH // 8), "prompts_batched": BATCH,
                      "tokens_per_s": {str(b): {"median": sorted(v)[len(v) // 2], "min": min(v), "max": max(v)}
                                       for b, v in runs.items()}}, indent=1))


if __name__ == "__main__":
    main()
