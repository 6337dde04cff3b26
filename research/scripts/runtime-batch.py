"""docs/results.md#compiled-runtime-at-batch-4: the batched engine under the compiled runtime
(``simspec.engine.compiled_rows``) against the eager one on the demo target, fp32: plain greedy
decoding and two static trees over a queue of held-out HumanEval prompts through B rows, the two
runtimes interleaved pass by pass (who goes first alternates). ``warm_up`` compiles every bucket
first, then one untimed pass runs everything; the compile seconds are reported.

    .venv/bin/python research/scripts/runtime-batch.py [BATCH] [N_PROMPTS] [PASSES] [NEW_TOKENS]

Prints one JSON line per (runtime, method) with the queue's tokens per second (median over passes,
and each pass's), then per method the ratio compiled / eager throughput (median over passes), and
whether every output equals plain greedy decoding in both runtimes."""
import json
import sys
import time

import numpy as np
import torch

from simspec.data import load_prompts, render_chat
from simspec.engine.load import load_pair
from simspec.engine.runtime import compiled_seconds
from simspec.engine.speculative import SpeculativeEngine
from simspec.machine import device_model
from simspec.policies.base import StaticPolicy

TREES = {"D=2 W=10 V=2": (2, 10, 2), "D=4 W=10 V=6": (4, 10, 6)}  # batch 4's best on this CPU, and batch 1's


def main() -> None:
    args = sys.argv[1:] + ["4", "8", "3", "48"][len(sys.argv) - 1:]
    batch, n_prompts, passes, new_tokens = (int(a) for a in args[:4])
    torch.set_num_threads(2)
    target, drafter = load_pair("smollm2-135m-instruct", "eagle")
    engines = {r: SpeculativeEngine(target, drafter, batch_size=batch, runtime=r) for r in ("eager", "compiled")}
    prompts = [render_chat(target.tokenizer, p.text) for p in load_prompts("humaneval", split="heldout", n=n_prompts)]
    methods = ["plain", *TREES]

    def run(runtime, method):
        engine = engines[runtime]
        if method == "plain":
            return engine.decode(prompts, None, new_tokens)
        return engine.decode(prompts, StaticPolicy(*TREES[method]), new_tokens)

    started = time.perf_counter()
    engines["compiled"].warm_up([len(p) for p in prompts], new_tokens, [t[2] for t in TREES.values()])
    reference = {}
    for runtime in engines:  # untimed: whatever warm_up missed compiles here, and outputs are checked
        for method in methods:
            out = [g.tokens for g in run(runtime, method).generations]
            reference.setdefault(runtime, out)
            assert out == reference[runtime], (runtime, method)
    assert reference["eager"] == reference["compiled"]
    warm_s = time.perf_counter() - started
    tps = {(r, m): [] for r in engines for m in methods}
    for k in range(passes):
        order = list(engines) if k % 2 == 0 else list(engines)[::-1]
        for runtime in order:
            for method in methods:
                result = run(runtime, method)
                assert [g.tokens for g in result.generations] == reference[runtime], (runtime, method, k)
                tps[runtime, method].append(result.tokens_per_s)
    for (runtime, method), values in tps.items():
        print(json.dumps({"runtime": runtime, "method": method, "tokens_per_s_median": float(np.median(values)),
                          "per_pass": values}))
    for method in methods:
        ratio = np.array(tps["compiled", method]) / np.array(tps["eager", method])
        print(json.dumps({"method": method, "compiled_over_eager_median": float(np.median(ratio)),
                          "per_pass": ratio.tolist()}))
    print(json.dumps({"batch": batch, "prompts": n_prompts, "passes": passes, "new_tokens": new_tokens,
                      "dtype": "fp32", "torch_threads": torch.get_num_threads(), "device_model": device_model("cpu"),
                      "compile_s": compiled_seconds(target), "untimed_first_pass_s": warm_s,
                      "lossless": True}))


if __name__ == "__main__":
    main()
