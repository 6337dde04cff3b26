"""Issue 50: tokens per second of teacher-text generation (the target continuing corpus prompts,
``simspec.engine.greedy``) at batch 1 and at larger batches, interleaved and repeated.

The same prompts are continued for 128 tokens at every batch size: ``max(BATCHES)`` prompts of the
``self`` pool (train split) around its median length, as the corpus batches them (sorted by length,
so a batch pads little); batch 1 continues the first eighth of them. Tokens counted are generated tokens (past
EOS too: the time a batch spends). Median and range over ``REPEATS`` rounds, batch sizes
alternating within each round.

    BATCHES=1,32,64,128 .venv/bin/python research/scripts/teacher-generation.py > real/drafters/teacher-generation.json
"""

from __future__ import annotations

import json
import os
import random
import time

import torch

from simspec.distill.sources import self_prompts
from simspec.engine.greedy import greedy_continuations
from simspec.engine.models import load_model
from simspec.machine import machine

BATCHES = [int(b) for b in os.environ.get("BATCHES", "1,32,64,128").split(",")]
REPEATS = int(os.environ.get("REPEATS", 3))
NEW = 128


def main() -> None:
    target = load_model("smollm2-135m-instruct", dtype="fp32")
    largest = max(BATCHES)
    pool = sorted(self_prompts(target.tokenizer, "self", 10**9, 384, NEW, "train", random.Random(0)), key=len)
    middle = (len(pool) - largest) // 2
    prompts = pool[middle:middle + largest]
    runs: dict[int, list[float]] = {b: [] for b in BATCHES}
    for _ in range(REPEATS):
        for batch in BATCHES:
            chosen = prompts[: max(2, largest // 8)] if batch == 1 else prompts[:batch]
            started = time.perf_counter()
            greedy_continuations(target, chosen, NEW, batch)
            runs[batch].append(len(chosen) * NEW / (time.perf_counter() - started))
    print(json.dumps({"machine": machine(), "torch_threads": torch.get_num_threads(), "dtype": "fp32",
                      "new_tokens": NEW, "prompt_tokens": [len(prompts[0]), len(prompts[-1])],
                      "prompts": {str(b): max(2, largest // 8) if b == 1 else b for b in BATCHES},
                      "tokens_per_s": {str(b): {"median": sorted(v)[len(v) // 2], "min": min(v), "max": max(v)}
                                       for b, v in runs.items()}}, indent=1))


if __name__ == "__main__":
    main()
