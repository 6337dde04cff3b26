"""docs/results.md: a bf16 divergence beyond the tie rule, explained or not. Runs one prompt and
one static tree in fp32 and bf16 against plain greedy decoding in the same dtype; in bf16 it
also runs the target alone, greedily, over the speculative output fed in the chunks the
speculative cycles verified (root + accepted tokens, no tree siblings, no drafter). If that
picks the speculative token where one-token decoding did not, chunked bf16 arithmetic, not the
engine, splits the two.

  .venv/bin/python research/scripts/bf16-divergence.py [PROMPT_ID D W V DRAFT]

Defaults: HumanEval/55 with D 5 W 4 V 6 and eagle-stage1 (research/runs/bench/bf16-divergence-he55.txt; that head is
not in the tree: DRAFTER=real/drafters/eagle-stage1 bash research/scripts/eagle3-drafter.sh retrains it);
HumanEval/48 5 4 6 eagle: research/runs/bench/bf16-divergence-he48.txt."""
import sys

import numpy as np
import torch

torch.set_num_threads(2)
from simspec.data import load_prompts, render_chat  # noqa: E402 (threads set first)
from simspec.engine.batch_models import TargetRows  # noqa: E402 (threads set first)
from simspec.engine.kv_rows import causal  # noqa: E402
from simspec.engine.load import load_drafter  # noqa: E402 (threads set first)
from simspec.engine.lossless import compare  # noqa: E402 (threads set first)
from simspec.engine.modeling import head_logits  # noqa: E402 (threads set first)
from simspec.engine.models import load_model  # noqa: E402 (threads set first)
from simspec.engine.speculative import SpeculativeEngine  # noqa: E402 (threads set first)
from simspec.policies import StaticPolicy  # noqa: E402 (threads set first)

defaults = ["HumanEval/55", "5", "4", "6", "real/drafters/eagle-stage1"]
pid, d_, w_, v_, draft = (sys.argv[1:] + defaults[len(sys.argv) - 1:])[:5]
p = [x for x in load_prompts("humaneval", split="heldout") if x.id == "humaneval/" + pid][0]
for dt in ("fp32", "bf16"):
    t = load_model("smollm2-135m-instruct", dtype=dt)
    eng = SpeculativeEngine(t, load_drafter(draft, t))
    ids = render_chat(t.tokenizer, p.text)
    g = eng.greedy(ids, 64).tokens
    out = eng.generate(ids, StaticPolicy(int(d_), int(w_), int(v_)), 64)
    d = compare(t, ids, out.tokens, g)
    print(dt, "divergence:", None if d is None else d.describe())
    if dt == "bf16":
        # plain greedy decoding, but the target fed in the speculative run's chunks (accepted + bonus per cycle)
        sizes = [c.accepted + 1 for c in out.cycles]
        spec = out.tokens
        with torch.inference_mode():
            rows = TargetRows(t, 1, len(ids) + len(spec) + 1)
            h, _ = rows.prefill(0, torch.tensor(ids))
            def top2(logits):  # argmax and the gap between the two largest logits, per row
                two = logits.float().topk(2, dim=-1).values
                return logits.argmax(-1).tolist(), (two[:, 0] - two[:, 1]).tolist()
            argmax, gaps = top2(head_logits(rows.head, h[-1:]))
            at = 0
            for size in sizes:  # the speculative output, fed in the cycles' chunks (root + accepted)
                chunk = spec[at:at + size]
                if not chunk:
                    break
                hh, _ = rows.forward({0: (np.array(chunk), np.arange(len(chunk)), causal(len(chunk)))})
                rows.keep(0, np.arange(len(chunk)))
                a, g = top2(head_logits(rows.head, hh[0]))
                argmax += a
                gaps += g
                at += size
        n = min(len(argmax), len(spec))
        mism = [i for i in range(n) if argmax[i] != spec[i]]
        print("bf16, target fed the speculative output in its cycles' chunks (no tree siblings): greedy choice differs "
              "from the speculative token at", mism[:5], "; sequential greedy differs at", d.position if d else None)
        for i in sorted(set(mism[:5]) | ({d.position} if d and d.position < n else set())):
            print(f"  token {i}: chunked target picks {argmax[i]} (speculative {spec[i]}), its top-2 gap {gaps[i]:.3g}")
