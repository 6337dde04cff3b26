"""docs/results.md#the-shipped-eagle-3-head-bf16: the one bf16 divergence beyond the tie rule
(HumanEval/55, token 47, D5 W4 V6) explained. The same prompt and tree in fp32: no divergence.
In bf16: the target alone, run greedily over the speculative output in the chunks the
speculative cycles verified (root + accepted tokens, no tree siblings, no drafter), picks the
speculative token at every position, token 47 included: chunked bf16 arithmetic, not the
engine, splits it from one-token decoding. Run: .venv/bin/python scripts/results/bf16-divergence-he55.py"""
import torch
torch.set_num_threads(2)
from simspec.engine.models import load_model
from simspec.engine.load import load_drafter
from simspec.engine.speculative import SpeculativeEngine, TargetCache
from simspec.engine.modeling import head_logits
from simspec.engine.lossless import compare
from simspec.policies import StaticPolicy
from simspec.data import load_prompts, render_chat
p = [x for x in load_prompts("humaneval", split="heldout") if x.id == "humaneval/HumanEval/55"][0]
for dt in ("fp32", "bf16"):
    t = load_model("smollm2-135m-instruct", dtype=dt)
    eng = SpeculativeEngine(t, load_drafter("eagle", t))
    ids = render_chat(t.tokenizer, p.text)
    g = eng.greedy(ids, 64).tokens
    out = eng.generate(ids, StaticPolicy(5, 4, 6), 64)
    d = compare(t, ids, out.tokens, g)
    print(dt, "divergence:", None if d is None else d.describe())
    if dt == "bf16":
        # plain greedy decoding, but the target fed in the speculative run's chunks (accepted + bonus per cycle)
        sizes = [c.accepted + 1 for c in out.cycles]
        spec = out.tokens
        with torch.inference_mode():
            cache = TargetCache(t); h = cache.forward(torch.tensor(ids)); cache.length = len(ids)
            argmax = [int(head_logits(cache.head, h[-1:]).argmax(-1))]
            at = 0
            for size in sizes:  # the speculative output, fed in the cycles' chunks (root + accepted)
                chunk = spec[at:at + size]
                if not chunk: break
                hh = cache.forward(torch.tensor(chunk)); cache.length += len(chunk)
                argmax += head_logits(cache.head, hh).argmax(-1).tolist()
                at += size
        n = min(len(argmax), len(spec))
        mism = [i for i in range(n) if argmax[i] != spec[i]]
        print("bf16, target fed the speculative output in its cycles' chunks (no tree siblings): greedy choice differs "
              "from the speculative token at", mism[:5], "; sequential greedy differs at", d.position if d else None)
