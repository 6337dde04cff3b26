"""docs/results.md#the-shipped-eagle-3-head-bf16: how far bf16 arithmetic moves the target's
top-2 logit gap between computation orders, in ulps of the top logit (the lossless check's tie
tolerance in bf16 rests on it).

For the greedy continuation (48 tokens) of 6 train-split HumanEval prompts, the logits of every
position are computed three ways: one token per forward with a KV cache (plain decoding), one
forward over the whole sequence, and chunks of 2..6 tokens per forward with a KV cache (what a
speculative run's verify passes do). Prints the spread of |gap(plain) - gap(other)|.
Run: .venv/bin/python research/scripts/bf16-tie-noise.py (about 1 minute on 2 cores)."""

import random

import numpy as np
import torch

from simspec.data import load_prompts, render_chat
from simspec.engine.batch_models import TargetRows
from simspec.engine.kv_rows import causal
from simspec.engine.load import load_drafter
from simspec.engine.modeling import head_logits
from simspec.engine.models import load_model
from simspec.engine.speculative import SpeculativeEngine

torch.set_num_threads(2)
target = load_model("smollm2-135m-instruct", dtype="bf16")
engine = SpeculativeEngine(target, load_drafter("target-layers:2", target))
rng = random.Random(0)


@torch.inference_mode()
def logits_in_chunks(sequence: torch.Tensor, n_prompt: int, sizes) -> torch.Tensor:
    """Logits predicting tokens n_prompt.. of ``sequence``, the continuation fed in ``sizes`` chunks."""
    rows = TargetRows(target, 1, len(sequence))
    hidden, _ = rows.prefill(0, sequence[:n_prompt])
    out = [head_logits(rows.head, hidden[-1:]).float()]
    at = n_prompt
    for size in sizes:
        chunk = sequence[at:at + size].numpy()
        if not len(chunk):
            break
        hidden, _ = rows.forward({0: (chunk, np.arange(len(chunk)), causal(len(chunk)))})
        rows.keep(0, np.arange(len(chunk)))
        out.append(head_logits(rows.head, hidden[0]).float())
        at += len(chunk)
    return torch.cat(out)


shifts = {"one forward": [], "chunks of 2-6": []}
for prompt in load_prompts("humaneval", split="train", n=6):
    ids = render_chat(target.tokenizer, prompt.text)
    continuation = engine.greedy(ids, 48).tokens
    sequence = torch.tensor(ids + continuation)
    n = len(continuation) - 1  # positions predicting continuation[1:] (and [0] from the prompt)
    plain = logits_in_chunks(sequence, len(ids), [1] * n)[:n]
    with torch.inference_mode():
        rows = TargetRows(target, 1, len(sequence))
        whole = head_logits(rows.head, rows.prefill(0, sequence)[0][len(ids) - 1:-1]).float()[:n]
    chunked = logits_in_chunks(sequence, len(ids), [rng.randint(2, 6) for _ in range(n)])[:n]
    two = plain.topk(2, -1).indices
    top = plain.gather(1, two[:, :1])[:, 0]
    ulp = torch.finfo(torch.bfloat16).eps * 2.0 ** torch.floor(torch.log2(top.abs().clamp(min=1e-3)))
    gap = lambda logits: logits.gather(1, two[:, :1])[:, 0] - logits.gather(1, two[:, 1:])[:, 0]  # noqa: E731
    for name, other in (("one forward", whole), ("chunks of 2-6", chunked)):
        shifts[name] += ((gap(plain) - gap(other)).abs() / ulp).tolist()
for name, values in shifts.items():
    print(f"top-2 gap, plain decoding vs {name}: |shift| in ulps of the top logit: median "
          f"{np.median(values):.2f}, p90 {np.percentile(values, 90):.2f}, p99 {np.percentile(values, 99):.2f}, "
          f"max {max(values):.2f} over {len(values)} positions")
