"""docs/results.md#compiled-runtime-at-batch-4: the batched engine under the compiled runtime
(``simspec.engine.compiled_rows``) against the eager one on the demo target, fp32: plain greedy
decoding and two static trees over a queue of held-out HumanEval prompts through B rows, the two
runtimes interleaved pass by pass (who goes first alternates). ``warm_up`` compiles every bucket
first, then one untimed pass runs everything; the compile seconds are reported.

    .venv/bin/python research/scripts/runtime-batch.py [BATCH] [N_PROMPTS] [PASSES] [NEW_TOKENS] [DATASET]

Prints one JSON line per (runtime, method) with the queue's tokens per second (median over passes,
and each pass's) and where a pass's time went (medians over passes: ms per batched target forward
after the prefills, ms per batched draft forward, and the seconds of prefill, draft, verify, policy
and the rest), then per method the ratio compiled / eager throughput (median over passes), and
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

# batch 4's best static tree on this CPU (2026-11-28), and the two trees of docs/results/engine.md's batch-4 rows
TREES = {"D=2 W=10 V=2": (2, 10, 2), "D=3 W=4 V=4": (3, 4, 4), "D=4 W=4 V=8": (4, 4, 8)}


def main() -> None:
    args = sys.argv[1:] + ["4", "8", "3", "48", "humaneval"][len(sys.argv) - 1:]
    batch, n_prompts, passes, new_tokens = (int(a) for a in args[:4])
    dataset = args[4]
    torch.set_num_threads(2)
    target, drafter = load_pair("smollm2-135m-instruct", "eagle")
    engines = {r: SpeculativeEngine(target, drafter, batch_size=batch, runtime=r) for r in ("eager", "compiled")}
    prompts = [render_chat(target.tokenizer, p.text) for p in load_prompts(dataset, split="heldout", n=n_prompts)]
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
    parts = {(r, m): [] for r in engines for m in methods}
    for k in range(passes):
        order = list(engines) if k % 2 == 0 else list(engines)[::-1]
        for runtime in order:
            for method in methods:
                result = run(runtime, method)
                assert [g.tokens for g in result.generations] == reference[runtime], (runtime, method, k)
                tps[runtime, method].append(result.tokens_per_s)
                parts[runtime, method].append(_breakdown(result))
    for (runtime, method), values in tps.items():
        split = {k: float(np.median([p[k] for p in parts[runtime, method]])) for k in parts[runtime, method][0]}
        print(json.dumps({"runtime": runtime, "method": method, "tokens_per_s_median": float(np.median(values)),
                          "per_pass": values, **split}))
    for method in methods:
        ratio = np.array(tps["compiled", method]) / np.array(tps["eager", method])
        print(json.dumps({"method": method, "compiled_over_eager_median": float(np.median(ratio)),
                          "per_pass": ratio.tolist()}))
    print(json.dumps({"batch": batch, "prompts": n_prompts, "dataset": dataset, "passes": passes,
                      "new_tokens": new_tokens,
                      "dtype": "fp32", "torch_threads": torch.get_num_threads(), "device_model": device_model("cpu"),
                      "compile_s": compiled_seconds(target), "untimed_first_pass_s": warm_s,
                      "lossless": True}))


def _breakdown(run) -> dict:
    """Where one pass's time went: per batched forward, and in seconds per part."""
    rest = run.total_s - run.prefill_s - run.draft_s - run.verify_s - run.policy_s
    return {"cycles": run.cycles, "verify_ms_per_cycle": 1e3 * run.verify_s / max(run.cycles, 1),
            "draft_ms_per_forward": 1e3 * run.draft_s / max(run.draft_forwards, 1),
            "draft_forwards_per_cycle": run.draft_forwards / max(run.cycles, 1),
            "prefill_s": run.prefill_s, "draft_s": run.draft_s, "verify_s": run.verify_s, "policy_s": run.policy_s,
            "rest_s": rest, "total_s": run.total_s}


if __name__ == "__main__":
    main()
