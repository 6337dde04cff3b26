"""docs/results/validation.md#one-torch-thread: how noisy one decoding run is with 1 and with 2 torch threads
on this machine. Each round runs plain greedy decoding and a static tree (D 4, V 6) on 4 held-out
ShareGPT prompts, 64 tokens, at 1 and at 2 threads, the thread counts alternating from round to
round; per prompt and thread count it prints the mean time per token and the coefficient of
variation (std / mean over rounds) of greedy, of the tree, and of their ratio (the speedup a
validation measures per run). Run it alone: it measures time (~9 min for 6 rounds on the EPYC-Z4).

    .venv/bin/python research/scripts/thread-noise.py [ROUNDS]
"""
import sys

import numpy as np
import torch

from simspec.data import load_prompts, render_chat
from simspec.engine.load import load_pair
from simspec.engine.speculative import SpeculativeEngine
from simspec.policies.base import StaticPolicy

target, drafter = load_pair("smollm2-135m-instruct", "eagle")
engine = SpeculativeEngine(target, drafter)
prompts = [render_chat(target.tokenizer, p.text) for p in load_prompts("sharegpt", split="heldout", n=4)]
tree = StaticPolicy(depth=4, width=10, size=6)
runs: dict[int, list[tuple[int, float, float]]] = {1: [], 2: []}
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 6
for r in range(rounds):
    for threads in (2, 1) if r % 2 else (1, 2):
        torch.set_num_threads(threads)
        for i, ids in enumerate(prompts):
            plain, spec = engine.greedy(ids, 64), engine.generate(ids, tree, 64)
            runs[threads].append((i, plain.total_s / len(plain.tokens), spec.total_s / len(spec.tokens)))
for threads in (1, 2):
    a = np.array(runs[threads])
    for i in range(len(prompts)):
        plain, spec = a[a[:, 0] == i, 1], a[a[:, 0] == i, 2]
        ratio = plain / spec
        cv = lambda x: x.std() / x.mean()  # noqa: E731
        print(f"threads {threads} prompt {i}: greedy {plain.mean() * 1e3:.1f} ms/token cv {cv(plain):.3f}  "
              f"tree cv {cv(spec):.3f}  speedup {ratio.mean():.3f} cv {cv(ratio):.3f}", flush=True)
