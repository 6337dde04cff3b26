"""Latency curves of a Llama forward replayed as CUDA graphs: what a serving engine pays.

``engine-curves.py`` times simspec's engine (Hugging Face eager), whose cost on a GPU is mostly
the host launching kernels. SGLang and vLLM capture their decode and verify forwards as CUDA
graphs, so the GPU's own arithmetic and memory traffic set their curves. This script builds a
plain Llama decoder (random weights, static KV cache, tree mask, GQA attention through
``scaled_dot_product_attention``), captures one graph per operating point, and times its replays
with CUDA events: the curves a graph-capturing server would show, without the server.

    python scripts/gpu/graph-curves.py --out OUT [--arch llama-3.1-8b]

Writes ``graph-curves-ARCH.json`` (``simspec-curves``: verify, draft, greedy) for
``calibrate --import-curves`` and ``scripts/gpu/compare-analytic.py``. CUDA only.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from importlib import import_module  # noqa: E402

_engine_curves = import_module("engine-curves")
ARCHS, curve_names = _engine_curves.ARCHS, _engine_curves.curve_names
from simspec.measure.curves import CurveGrid  # noqa: E402


class Llama:
    """Weights of ``layers`` Llama decoder layers plus head; forward over n tree tokens after a
    fixed context (the graph's shape), writing their keys and values into a static cache."""

    def __init__(self, shape: dict, layers: int, vocab: int, input_mix: int, max_len: int, dtype, device):
        g = torch.Generator(device=device).manual_seed(0)
        rnd = lambda *s: (torch.randn(*s, generator=g, device=device, dtype=torch.float32) * 0.02).to(dtype)  # noqa
        h, i = shape["hidden_size"], shape["intermediate_size"]
        self.heads, self.kvh = shape["num_attention_heads"], shape["num_key_value_heads"]
        self.hd = h // self.heads
        kv = self.kvh * self.hd
        width = 2 * h if input_mix else h  # EAGLE-3's layer: q/k/v read [embedding ; hidden]
        self.embed = rnd(shape["vocab_size"], h)
        self.layers = [dict(qkv=rnd(h + 2 * kv, width), o=rnd(h, h), gu=rnd(2 * i, h), down=rnd(h, i))
                       for _ in range(layers)]
        self.head = rnd(vocab, h)
        self.k = torch.zeros(layers, 1, self.kvh, max_len, self.hd, device=device, dtype=dtype)
        self.v = torch.zeros_like(self.k)
        self.theta = shape["rope_theta"]
        self.eps = shape["rms_norm_eps"]

    def angles(self, positions, dtype):
        """cos and sin of the rotary angles, [n, 1, hd/2]: once per forward, shared by the layers."""
        freqs = 1.0 / (self.theta ** (torch.arange(0, self.hd, 2, device=positions.device, dtype=torch.float32)
                                      / self.hd))
        angles = positions[:, None].float() * freqs[None]
        return angles.cos().to(dtype)[:, None], angles.sin().to(dtype)[:, None]

    @staticmethod
    def rope(x, cos, sin):
        x1, x2 = x[..., ::2], x[..., 1::2]
        return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1).flatten(-2)

    def norm(self, x):
        return F.rms_norm(x, (x.shape[-1],), eps=self.eps)  # one fused kernel on CUDA

    def forward(self, tokens, positions, mask, context: int, hidden=None, top: int = 0):
        n = tokens.shape[0]
        x = self.embed[tokens]
        cos, sin = self.angles(positions, x.dtype)
        if hidden is not None:  # a draft step: the head's own output of the parent, width H
            resid = hidden
        for li, w in enumerate(self.layers):
            inp = torch.cat([self.norm(x), self.norm(resid)], -1) if hidden is not None else self.norm(x)
            base = resid if hidden is not None else x
            qkv = inp @ w["qkv"].T
            q, k, v = qkv.split([self.heads * self.hd, self.kvh * self.hd, self.kvh * self.hd], -1)
            q = self.rope(q.view(n, self.heads, self.hd), cos, sin).transpose(0, 1)[None]
            k = self.rope(k.view(n, self.kvh, self.hd), cos, sin).transpose(0, 1)
            self.k[li, 0, :, context:context + n] = k
            self.v[li, 0, :, context:context + n] = v.view(n, self.kvh, self.hd).transpose(0, 1)
            keys, values = self.k[li, :, :, :context + n], self.v[li, :, :, :context + n]
            att = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, enable_gqa=True)
            x = base + att[0].transpose(0, 1).reshape(n, -1) @ w["o"].T
            g, u = (self.norm(x) @ w["gu"].T).chunk(2, -1)
            x = x + (F.silu(g) * u) @ w["down"].T
            hidden = None
        logits = self.norm(x) @ self.head.T
        return logits.topk(top, -1).indices if top else logits.argmax(-1)


def time_graph(model: Llama, n: int, context: int, repeats: int, draft_top: int = 0) -> list[float]:
    device = model.embed.device
    tokens = torch.randint(100, model.embed.shape[0], (n,), device=device)
    positions = context + torch.arange(n, device=device)
    visible = torch.ones(n, context + n, dtype=torch.bool, device=device)
    visible[:, context:] = torch.tril(torch.ones(n, n, dtype=torch.bool, device=device))
    mask = torch.zeros(visible.shape, dtype=model.embed.dtype, device=device).masked_fill(~visible, float("-inf"))
    hidden = torch.randn(n, model.embed.shape[1], device=device, dtype=model.embed.dtype) if draft_top else None
    run = lambda: model.forward(tokens, positions, mask, context, hidden, draft_top)  # noqa: E731
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            run()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    for _ in range(3):
        graph.replay()
    seconds = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        seconds.append(start.elapsed_time(end) / 1e3)
    del graph
    return seconds


@torch.inference_mode()
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--arch", default="llama-3.1-8b")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    grid = CurveGrid()
    for arch in args.arch.split(","):
        shape = {k: v for k, v in ARCHS[arch].items() if k != "names"}
        start = time.perf_counter()
        target = Llama(shape, shape["num_hidden_layers"], shape["vocab_size"], 0, 1024, torch.bfloat16, "cuda")
        draft = Llama(shape, 1, shape["draft_vocab"], 3, 1024, torch.bfloat16, "cuda")
        samples = []
        for c in grid.contexts:
            samples += [{"kind": "verify", "n": v, "context": c, "seconds": time_graph(target, v, c, args.repeats)}
                        for v in grid.verify_sizes]
            samples += [{"kind": "draft", "n": w, "context": c,
                         "seconds": time_graph(draft, w, c, args.repeats, draft_top=grid.book_width)}
                        for w in grid.draft_nodes]
            print(f"[{arch}] context {c} done, {time.perf_counter() - start:.0f} s", flush=True)
        samples += [{"kind": "greedy", "n": 1, "context": c, "seconds": time_graph(target, 1, c, args.repeats)}
                    for c in grid.greedy_contexts]
        curves = {"schema": "simspec-curves", "schema_version": 1, "device": torch.cuda.get_device_name(0),
                  "engine": {"name": "cuda-graph llama", "version": "scripts/gpu/graph-curves.py",
                             "settings": f"one CUDA graph per point, bf16, sdpa with GQA, random weights in the "
                                         f"models' shapes, torch {torch.__version__}"},
                  "dtype": "bf16", **curve_names(arch),
                  "samples": samples}
        (args.out / f"graph-curves-{arch}.json").write_text(json.dumps(curves))
        for s in samples:
            if s["context"] == 512 and (s["kind"], s["n"]) in (("verify", 1), ("verify", 16), ("verify", 64),
                                                              ("verify", 128), ("verify", 256), ("draft", 10)):
                ms = sorted(s["seconds"])[len(s["seconds"]) // 2] * 1e3
                print(f"[{arch}] {s['kind']:6s} n={s['n']:3d} L=512: {ms:.3f} ms", flush=True)
        del target, draft
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
