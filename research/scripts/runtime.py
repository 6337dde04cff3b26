"""docs/results/engine.md#compiled-runtime: the compiled runtime (``simspec.engine.runtime``) against the
eager one on the demo target, fp32: plain greedy decoding, the shipped profile's best static tree
and EAGLE-3's default tree, ms per generated token, the two runtimes interleaved prompt by prompt
and pass by pass (who goes first alternates). The compiled engine's ``warm_up`` compiles every
shape bucket the timed passes use, then one untimed pass runs everything; the compile seconds are
reported.

    .venv/bin/python research/scripts/runtime.py [N_PROMPTS] [PASSES] [NEW_TOKENS] [D,W,V]

Prints one JSON line per (runtime, method) with the median, the quartiles and the per-pass
medians, then per method the ratio eager / compiled (median of per-prompt-and-pass ratios) and
whether every output equals its runtime's plain greedy decoding and the eager one's."""
import json
import sys
import time

import numpy as np
import torch

from simspec.data import load_prompts, render_chat
from simspec.engine.load import load_pair
from simspec.engine.speculative import SpeculativeEngine
from simspec.machine import device_model
from simspec.policies.base import StaticPolicy


def main() -> None:
    args = sys.argv[1:] + ["8", "3", "64", "4,10,8"][len(sys.argv) - 1:]
    n_prompts, passes, new_tokens = (int(a) for a in args[:3])
    best = tuple(int(x) for x in args[3].split(","))
    torch.set_num_threads(2)
    target, drafter = load_pair("smollm2-135m-instruct", "eagle")
    engines = {r: SpeculativeEngine(target, drafter, runtime=r) for r in ("eager", "compiled")}
    prompts = [render_chat(target.tokenizer, p.text) for p in load_prompts("humaneval", split="heldout", n=n_prompts)]
    methods = {"plain": None, f"best static D={best[0]} W={best[1]} V={best[2]}": best,
               "eagle3-default D=8 W=10 V=60": (8, 10, 60)}

    def run(runtime, method, ids):
        engine = engines[runtime]
        shape = methods[method]
        return engine.greedy(ids, new_tokens) if shape is None else engine.generate(ids, StaticPolicy(*shape),
                                                                                   new_tokens)

    started = time.perf_counter()
    # as bench-engine and validate --real do: every bucket compiled, the trees' slack set
    engines["compiled"].warm_up([len(ids) for ids in prompts], new_tokens, [s[2] for s in methods.values() if s])
    plain = {}
    for i, ids in enumerate(prompts):  # untimed: compiles every bucket and capacity the passes meet
        for runtime in engines:
            for method in methods:
                out = run(runtime, method, ids)
                plain.setdefault((runtime, i), out.tokens)
                assert out.tokens == plain[runtime, i], (runtime, method, i)
    warm_s = time.perf_counter() - started
    ms = {(r, m): [[] for _ in range(passes)] for r in engines for m in methods}
    for k in range(passes):
        for i, ids in enumerate(prompts):
            order = list(engines) if (k + i) % 2 == 0 else list(engines)[::-1]
            for runtime in order:
                for method in methods:
                    start = time.perf_counter()
                    out = run(runtime, method, ids)
                    ms[runtime, method][k].append(1e3 * (time.perf_counter() - start) / len(out.tokens))
                    assert out.tokens == plain[runtime, i], (runtime, method, i)  # lossless in its runtime
    for (runtime, method), per_pass in ms.items():
        flat = np.concatenate(per_pass)
        print(json.dumps({"runtime": runtime, "method": method, "ms_per_token_median": float(np.median(flat)),
                          "q25": float(np.percentile(flat, 25)), "q75": float(np.percentile(flat, 75)),
                          "per_pass_medians": [float(np.median(p)) for p in per_pass]}))
    for method in methods:
        ratio = np.array(sum(ms["eager", method], [])) / np.array(sum(ms["compiled", method], []))
        print(json.dumps({"method": method, "eager_over_compiled_median": float(np.median(ratio)),
                          "q25": float(np.percentile(ratio, 25)), "q75": float(np.percentile(ratio, 75)),
                          "per_pass_medians": [float(np.median(ratio[k * len(prompts):(k + 1) * len(prompts)]))
                                               for k in range(passes)]}))
    same = sum(plain["eager", i] == plain["compiled", i] for i in range(len(prompts)))
    print(json.dumps({"prompts": n_prompts, "passes": passes, "new_tokens": new_tokens, "dtype": "fp32",
                      "torch_threads": torch.get_num_threads(), "device_model": device_model("cpu"),
                      "compile_s": engines["compiled"].compile_s, "untimed_first_pass_s": warm_s,
                      "compiled_plain_equals_eager_plain": f"{same}/{len(prompts)}", "lossless": True}))


if __name__ == "__main__":
    main()
