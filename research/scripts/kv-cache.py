"""docs/results/engine.md#static-kv-cache: the engine's static KV cache (``simspec.engine.kv_rows``)
against the ``DynamicCache`` it replaced (concatenation per forward, a copy per non-prefix
acceptance), on the demo target: plain greedy decoding and speculative decoding with EAGLE-3's
default tree, ms per generated token, the two caches interleaved prompt by prompt and pass by pass.

    git worktree add /tmp/at-8b78131 8b78131 && cd /tmp/at-8b78131 &&
    .venv/bin/python research/scripts/kv-cache.py [N_PROMPTS] [PASSES] [NEW_TOKENS]

It patches the batch-1 engine's ``target_cache`` of that commit (the table's), which the
batch-native engine no longer has: it runs there.

Prints one JSON line per (cache, method) with the median, the quartiles and the per-pass medians,
and the ratio dynamic / static (median of per-prompt ratios)."""
import json
import sys
import time

import numpy as np
import torch

from simspec.data import load_prompts, render_chat
from simspec.engine import target_cache
from simspec.engine.load import load_pair
from simspec.engine.speculative import SpeculativeEngine
from simspec.policies.base import StaticPolicy


class DynamicTargetCache(target_cache.TargetCache):
    """The engine before the static cache: ``DynamicCache``, ``torch.cat`` to keep a moved path."""

    def __init__(self, target, feature_layers=None, capacity=0):
        from transformers import DynamicCache

        super().__init__(target, feature_layers, capacity=1)
        self.cache = DynamicCache()

    def keep(self, rows, n_new):
        if rows[-1] == len(rows) - 1:
            if n_new > len(rows):
                self.cache.crop(len(rows) - n_new)
        else:
            index = torch.as_tensor(self.length + rows)
            for layer in self.cache.layers:
                layer.keys = torch.cat([layer.keys[..., : self.length, :], layer.keys.index_select(-2, index)], -2)
                layer.values = torch.cat([layer.values[..., : self.length, :],
                                          layer.values.index_select(-2, index)], -2)
        self.length += len(rows)


def main() -> None:
    n_prompts, passes, new_tokens = (int(a) for a in (sys.argv[1:] + ["8", "3", "64"][len(sys.argv) - 1:])[:3])
    import simspec.engine.speculative as spec

    torch.set_num_threads(2)
    target, drafter = load_pair("smollm2-135m-instruct", "eagle")
    engine = SpeculativeEngine(target, drafter)
    prompts = [render_chat(target.tokenizer, p.text)
               for p in load_prompts("humaneval", split="heldout", n=n_prompts)]
    caches = {"static": target_cache.TargetCache, "dynamic": DynamicTargetCache}
    methods = {"plain": lambda ids: engine.greedy(ids, new_tokens),
               "eagle3-default": lambda ids: engine.generate(ids, StaticPolicy(8, 10, 60), new_tokens)}
    ms = {(c, m): [[] for _ in range(passes)] for c in caches for m in methods}
    outputs = {}
    for k in range(passes):
        for i, ids in enumerate(prompts):
            order = list(caches) if (k + i) % 2 == 0 else list(caches)[::-1]  # rotate who goes first
            for cache in order:
                spec.target_cache = lambda t, f, c, r, kind=caches[cache]: kind(t, f, c)
                for method, run in methods.items():
                    start = time.perf_counter()
                    out = run(ids)
                    seconds = time.perf_counter() - start
                    ms[cache, method][k].append(1e3 * seconds / len(out.tokens))
                    # lossless either way: every output is the prompt's plain greedy decoding
                    assert out.tokens == outputs.setdefault(i, out.tokens), (cache, method, i)
    for (cache, method), per_pass in ms.items():
        flat = np.concatenate(per_pass)
        print(json.dumps({"cache": cache, "method": method, "ms_per_token_median": float(np.median(flat)),
                          "q25": float(np.percentile(flat, 25)), "q75": float(np.percentile(flat, 75)),
                          "per_pass_medians": [float(np.median(p)) for p in per_pass]}))
    for method in methods:
        ratio = np.array(sum(ms["dynamic", method], [])) / np.array(sum(ms["static", method], []))
        print(json.dumps({"method": method, "dynamic_over_static_median": float(np.median(ratio)),
                          "q25": float(np.percentile(ratio, 25)), "q75": float(np.percentile(ratio, 75)),
                          "prompts": n_prompts, "passes": passes, "new_tokens": new_tokens,
                          "torch_threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
