"""Latency curves of simspec's own engine on a GPU, for target architectures with random weights.

Latency depends on shapes and dtype, never on weight values, so a Llama-3.1-8B-class target
and its EAGLE-3-style head, both randomly initialised, have the curves the real pair has in the
same engine. This times exactly what ``simspec calibrate`` times on a CPU (``measure_curves``:
verify, draft, plain step, prefill, host bookkeeping; ``measure_batched`` at batch > 1), and
writes one ``simspec-curves`` file per architecture, which ``calibrate --import-curves`` turns
into a profile and ``scripts/gpu/compare-analytic.py`` holds against the roofline model.

    python scripts/gpu/engine-curves.py --out OUT [--arch llama-3.1-8b,smollm2-135m] [--quick]

A CUDA check rides along: greedy speculative decoding equals plain greedy decoding on the GPU
for several tree shapes (random weights: near-ties are reported as such, with their logit gap).
Needs torch, transformers, safetensors, numpy and threadpoolctl; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from simspec import __version__  # noqa: E402
from simspec.engine.eagle import EagleDrafter  # noqa: E402
from simspec.engine.eagle_public import Eagle3Head, eagle3_for_target  # noqa: E402
from simspec.engine.models import LoadedModel, ModelSource  # noqa: E402
from simspec.machine import cpu_model  # noqa: E402
from simspec.measure.curves import BatchGrid, CurveGrid, measure_batched, measure_curves  # noqa: E402

# Public shapes (config.json of each model); draft vocabularies as EAGLE-3's Llama-3.1-8B head
# (32k) and simspec's shipped SmolLM2 head (8,192). ``names``: the (target, draft) a curves file
# names, so that `calibrate --import-curves` pairs the demo-shaped curves with the demo's traces.
ARCHS = {
    "llama-3.1-8b": dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                         num_attention_heads=32, num_key_value_heads=8, rope_theta=500000.0, rms_norm_eps=1e-5,
                         max_position_embeddings=8192, tie_word_embeddings=False, draft_vocab=32000),
    "smollm2-135m": dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                         num_attention_heads=9, num_key_value_heads=3, rope_theta=100000.0, rms_norm_eps=1e-5,
                         max_position_embeddings=8192, tie_word_embeddings=True, draft_vocab=8192,
                         names=("smollm2-135m-instruct", "eagle")),
    # For trying the script on a CPU: seconds, not minutes.
    "tiny": dict(vocab_size=4096, hidden_size=128, intermediate_size=256, num_hidden_layers=6,
                 num_attention_heads=4, num_key_value_heads=2, rope_theta=10000.0, rms_norm_eps=1e-5,
                 max_position_embeddings=4096, tie_word_embeddings=False, draft_vocab=1024),
}
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def build_pair(arch: str, device: str, dtype: torch.dtype, seed: int) -> tuple[LoadedModel, EagleDrafter]:
    """A random-weight target of ``arch`` and a random EAGLE-3 head for it, on ``device``."""
    from transformers import LlamaConfig, LlamaForCausalLM

    shape = {k: v for k, v in ARCHS[arch].items() if k != "names"}
    draft_vocab = shape.pop("draft_vocab")
    config = LlamaConfig(**shape, bos_token_id=1, eos_token_id=2)
    config._attn_implementation = "sdpa"  # what from_pretrained picks for simspec's engine
    torch.manual_seed(seed)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # built in dtype on the device: an 8B model never exists in fp32
    try:
        with torch.device(device):
            model = LlamaForCausalLM(config).eval().requires_grad_(False)
            target = LoadedModel(ModelSource(f"arch:{arch} (random weights)", Path(".")), model, None)
            head = Eagle3Head(eagle3_for_target(target, draft_vocab))
    finally:
        torch.set_default_dtype(previous)
    head.to(device, dtype)
    # d2t: draft id i means target id 7 i mod V (a non-trivial map, as trained heads have).
    ids = (torch.arange(draft_vocab, device=device) * 7) % shape["vocab_size"]
    head.d2t.copy_(ids - torch.arange(draft_vocab, device=device))
    return target, EagleDrafter(head, head.target_ids(), target, f"eagle3 for {arch} (random weights)")


def curve_names(arch: str) -> dict:
    """The target and draft a curves file names (their shapes, not their weights, were timed)."""
    default = (f"arch:{arch}", f"eagle3 (draft vocabulary {ARCHS[arch]['draft_vocab']})")
    target, draft = ARCHS[arch].get("names", default)
    return {"target": target, "draft": draft}


def lossless_check(target: LoadedModel, drafter: EagleDrafter, prompts: int, new_tokens: int) -> list[dict]:
    """Greedy speculative vs plain greedy on random prompts, several tree shapes."""
    from simspec.engine.lossless import compare
    from simspec.engine.speculative import SpeculativeEngine
    from simspec.policies.base import StaticPolicy

    engine = SpeculativeEngine(target, drafter)
    generator = torch.Generator().manual_seed(1)
    vocab = target.model.config.vocab_size
    rows = []
    for p in range(prompts):
        ids = torch.randint(100, vocab, (48 + 16 * p,), generator=generator).tolist()
        greedy = engine.greedy(ids, new_tokens).tokens
        for depth, width, size in ((1, 1, 1), (4, 2, 8), (6, 4, 24), (8, 10, 60)):
            out = engine.generate(ids, StaticPolicy(depth, width, size), new_tokens)
            d = compare(target, ids, out.tokens, greedy)
            rows.append({"prompt": p, "depth": depth, "width": width, "size": size, "equal": d is None,
                         "near_tie": None if d is None else bool(d.near_tie),
                         "divergence": None if d is None else d.describe(),
                         "tau": float(sum(c.accepted for c in out.cycles) / max(len(out.cycles), 1))})
    return rows


def environment(device: str) -> dict:
    import transformers

    env = {"simspec": __version__, "torch": torch.__version__, "transformers": transformers.__version__,
           "python": platform.python_version(), "host_cpu": cpu_model()}
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(0)
        env.update(gpu=torch.cuda.get_device_name(0), cuda=torch.version.cuda, sms=props.multi_processor_count,
                   gpu_memory_gib=round(props.total_memory / 2**30, 1))
    return env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--arch", default="llama-3.1-8b,smollm2-135m")
    parser.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch-sizes", default="1,2,4,8")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="the small grid (tests, trying the script)")
    parser.add_argument("--lossless-prompts", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    dtype = DTYPES[args.dtype]
    grid = CurveGrid.quick() if args.quick else CurveGrid(repeats=args.repeats)
    batches = tuple(int(b) for b in args.batch_sizes.split(","))
    env = environment(args.device)
    print(json.dumps(env), flush=True)
    for arch in args.arch.split(","):
        start = time.perf_counter()
        target, drafter = build_pair(arch, args.device, dtype, args.seed)
        print(f"[{arch}] built in {time.perf_counter() - start:.1f} s", flush=True)
        done = [0]
        total = grid.count() + BatchGrid().count(batches)

        def advance() -> None:
            done[0] += 1
            if done[0] % 40 == 0 or done[0] == total:
                print(f"[{arch}] {done[0]}/{total} points, {time.perf_counter() - start:.0f} s", flush=True)

        samples = measure_curves(target, drafter, grid, advance)
        batched = measure_batched(target, drafter, batches, BatchGrid(), advance) if len(batches) > 1 else []
        device_name = env.get("gpu", f"cpu ({env['host_cpu']})")
        settings = (f"Hugging Face transformers {env['transformers']} eager, sdpa attention, {args.dtype}, "
                    f"random weights in the models' shapes, torch {env['torch']}")
        curves = {"schema": "simspec-curves", "schema_version": 1, "device": device_name,
                  "engine": {"name": "simspec", "version": __version__, "settings": settings},
                  "dtype": args.dtype, **curve_names(arch),
                  "samples": [{"kind": s["kind"], "n": s["n"], "context": s["context"], "seconds": s["samples"]}
                              for s in samples]}
        (args.out / f"curves-{arch}.json").write_text(json.dumps(curves))
        (args.out / f"batched-{arch}.json").write_text(json.dumps({"environment": env, "samples": batched}))
        print(f"[{arch}] curves in {time.perf_counter() - start:.0f} s", flush=True)
        if args.lossless_prompts:
            rows = lossless_check(target, drafter, args.lossless_prompts, 32)
            (args.out / f"lossless-{arch}.json").write_text(json.dumps({"environment": env, "rows": rows}, indent=1))
            bad = [r for r in rows if not r["equal"] and not r["near_tie"]]
            print(f"[{arch}] lossless: {sum(r['equal'] for r in rows)}/{len(rows)} equal, "
                  f"{sum(bool(r['near_tie']) for r in rows)} near-tie, {len(bad)} real divergences", flush=True)
        for s in samples:  # a few points to read in the reply
            if (s["kind"], s["n"], s["context"]) in (("verify", 1, 512), ("verify", 64, 512), ("verify", 256, 512),
                                                     ("draft", 10, 512), ("greedy", 1, 512)):
                print(f"[{arch}] {s['kind']:7s} n={s['n']:3d} L={s['context']}: {s['median'] * 1e3:.2f} ms", flush=True)
        del target, drafter
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
