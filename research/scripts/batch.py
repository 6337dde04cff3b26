"""docs/results/batches.md#batches: the batched engine (``simspec.engine.batch``) on the demo target with
its EAGLE head at batch 1 and 4, against the simulator's prediction at each batch size
(``simspec.sim.replay.replay`` at that batch, the profile's curves there).

    .venv/bin/python research/scripts/batch.py PROFILE [N_PROMPTS] [PASSES] [NEW_TOKENS]

PROFILE: measured on this machine right before, with curves at batch 1 and 4 and traces that
hold the held-out HumanEval prompts, e.g.
``simspec calibrate --gpu cpu --traces-from calibration/traces-humaneval-eagle --batch-sizes 1,4``.
Every pass runs plain decoding and each static tree at both batch sizes, interleaved (the order
rotates pass by pass); a speedup is plain decoding's time for the whole prompt set over the
method's at the same batch size (the same tokens: every output is checked against plain
decoding's). Prints one JSON line per (batch, method) and one for plain decoding's throughput
at batch 4 over batch 1, real and predicted."""
import json
import sys

import numpy as np
import torch

from simspec.data import load_prompts, render_chat
from simspec.engine.load import load_pair
from simspec.engine.speculative import SpeculativeEngine
from simspec.policies.base import StaticPolicy
from simspec.sim.profile import load_profile
from simspec.sim.replay import replay

TREES = [(4, 10, 6), (6, 10, 12), (8, 10, 60)]  # (D, W, V): short, mid, EAGLE-3's default
BATCHES = (1, 4)


def main() -> None:
    profile_path = sys.argv[1]
    n_prompts, passes, new_tokens = (int(a) for a in (sys.argv[2:] + ["8", "3", "64"][len(sys.argv) - 2:])[:3])
    torch.set_num_threads(2)
    profile = load_profile(profile_path)
    traces = profile.traces()
    chosen = load_prompts("humaneval", split="heldout", n=n_prompts)
    index = [traces.meta.prompt_ids.index(p.id) for p in chosen]
    target, drafter = load_pair("smollm2-135m-instruct", "eagle")
    prompts = [render_chat(target.tokenizer, p.text) for p in chosen]
    methods = {"plain": None, **{f"D={d} W={w} V={v}": StaticPolicy(d, w, v) for d, w, v in TREES}}
    runs = {(b, m): [] for b in BATCHES for m in methods}
    reference = None
    for k in range(passes):
        keys = list(runs)
        for b, m in np.roll(np.array(keys, dtype=object), -k * 3, axis=0):
            engine = SpeculativeEngine(target, drafter, batch_size=int(b))
            run = engine.decode(prompts, methods[m], new_tokens)
            outputs = [g.tokens for g in run.generations]
            assert outputs == (reference := reference or outputs), (b, m)  # lossless, every batch and tree
            runs[int(b), m].append(run)
    for b in BATCHES:
        plain = runs[b, "plain"]
        for m, policy in methods.items():
            if policy is None:
                continue
            real = [p.total_s / r.total_s for p, r in zip(plain, runs[b, m])]
            sim = replay(traces, profile.cost, policy, new_tokens, prompts=np.array([index]), batch=b)
            print(json.dumps({"batch": b, "method": m, "speedup_real_median": float(np.median(real)),
                              "per_pass": [round(x, 4) for x in real], "speedup_sim": sim.set_speedup,
                              "rel_error": sim.set_speedup / float(np.median(real)) - 1,
                              "cycles_real": runs[b, m][0].cycles, "cycles_sim": int(sim.cycles[0]),
                              "tokens_per_s_real": float(np.median(
                                  [r.tokens_per_s for r in runs[b, m]]))}))
    ratio = [four.tokens_per_s / one.tokens_per_s for one, four in zip(runs[1, "plain"], runs[4, "plain"])]
    plain_sim = {b: replay(traces, profile.cost, StaticPolicy(1, traces.width, 1), new_tokens,
                           prompts=np.array([index]), batch=b) for b in BATCHES}
    plain_sim = {b: float(r.greedy_seconds[0] + r.prefill_seconds[0]) for b, r in plain_sim.items()}
    print(json.dumps({"plain_b4_over_b1_real_median": float(np.median(ratio)), "per_pass": ratio,
                      "plain_b4_over_b1_sim": plain_sim[1] / plain_sim[4],
                      "plain_tokens_per_s_real": {b: float(np.median([r.tokens_per_s for r in runs[b, "plain"]]))
                                                  for b in BATCHES},
                      "prompts": n_prompts, "passes": passes, "new_tokens": new_tokens, "profile": profile_path,
                      "torch_threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
