"""Measured GPU curves against the roofline model that simspec's analytic profiles use.

For each curves file (``engine-curves.py``: simspec's eager engine; ``graph-curves.py``: CUDA
graphs), prices the same operating points with ``simspec.sim.analytic.forward_seconds`` for the
GPU that was measured and prints, in markdown: absolute latencies at context 512, the verify
curve's shape (cost of V tokens over cost of one, what tree size trades against), and the
median measured / modelled ratio per kind. numpy only.

    python scripts/gpu/compare-analytic.py research/runs/gpu/h200 --gpu h200
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from simspec.sim.analytic import LLAMA31_8B, LLAMA31_8B_DRAFT, Architecture, device_spec, forward_seconds  # noqa
from simspec.sim.imported import load_curves  # noqa: E402

SMOLLM2 = Architecture(layers=30, hidden=576, heads=9, kv_heads=3, intermediate=1536, vocab=49152)
# The shipped head's shape as calibrate prices it (simspec.measure.curves.drafter_architecture).
SMOLLM2_DRAFT = Architecture(layers=1, hidden=576, heads=9, kv_heads=3, intermediate=1536, vocab=8192, input_mix=2)
ARCHS = {"arch:llama-3.1-8b": (LLAMA31_8B, LLAMA31_8B_DRAFT), "smollm2-135m-instruct": (SMOLLM2, SMOLLM2_DRAFT)}
SIZES = (1, 8, 16, 32, 64, 128, 256)


def medians(samples) -> dict[tuple[str, int, int], float]:
    return {(s["kind"], s["n"], s["context"]): float(np.median(s["samples"])) for s in samples}


def modelled(gpu: str, target: Architecture, draft: Architecture, kind: str, n: int, context: int) -> float:
    arch = draft if kind == "draft" else target
    return forward_seconds(device_spec(gpu), arch, n, context)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--gpu", default="h200")
    parser.add_argument("--context", type=int, default=512)
    args = parser.parse_args()
    files = sorted(args.folder.glob("*curves-*.json"))
    if not files:
        print(f"no *curves-*.json in {args.folder}", file=sys.stderr)
        return 2
    L = args.context
    head = " | ".join(f"V={v}" for v in SIZES)
    print(f"Verify latency at context {L}, ms (measured / roofline for {args.gpu.upper()}):\n")
    print(f"| curves | runtime | {head} | draft W=10 | plain step |")
    print("|" + " --- |" * (len(SIZES) + 4))
    shapes, ratios = [], []
    for file in files:
        meta, samples = load_curves(file)
        target, draft = ARCHS[meta["target"]]
        m = medians(samples)
        runtime = "CUDA graphs" if meta["engine"]["name"].startswith("cuda-graph") else "simspec engine (HF eager)"
        row = lambda kind, n, c: f"{m[(kind, n, c)] * 1e3:.2f} / {modelled(args.gpu, target, draft, kind, n, c) * 1e3:.2f}"  # noqa
        cells = [row("verify", v, L) for v in SIZES] + [row("draft", 10, L), row("greedy", 1, L)]
        print(f"| {meta['target'].removeprefix('arch:')} | {runtime} | " + " | ".join(cells) + " |")
        v1 = m[("verify", 1, L)]
        a1 = modelled(args.gpu, target, draft, "verify", 1, L)
        shapes.append((meta["target"].removeprefix("arch:"), runtime,
                       [(m[("verify", v, L)] / v1, modelled(args.gpu, target, draft, "verify", v, L) / a1)
                        for v in SIZES[1:]],
                       (m[("draft", 10, L)] / v1, modelled(args.gpu, target, draft, "draft", 10, L) / a1)))
        per_kind = {}
        for (kind, n, c), seconds in m.items():
            if kind in ("verify", "draft", "greedy"):
                per_kind.setdefault(kind, []).append(seconds / modelled(args.gpu, target, draft, kind, n, c))
        ratios.append((meta["target"].removeprefix("arch:"), runtime, {k: np.median(v) for k, v in per_kind.items()},
                       {k: (np.min(v), np.max(v)) for k, v in per_kind.items()}))
    print(f"\nShape: cost of V tokens over cost of one (verify), and of a W = 10 draft step over one target "
          f"token, at context {L} (measured / roofline):\n")
    print("| curves | runtime | " + " | ".join(f"V={v}" for v in SIZES[1:]) + " | draft W=10 |")
    print("|" + " --- |" * (len(SIZES) + 2))
    for name, runtime, verify, drafting in shapes:
        cells = [f"{a:.2f} / {b:.2f}" for a, b in verify] + [f"{drafting[0]:.3f} / {drafting[1]:.3f}"]
        print(f"| {name} | {runtime} | " + " | ".join(cells) + " |")
    print("\nMeasured / roofline over every point of the grid (median, range):\n")
    print("| curves | runtime | verify | draft | plain step |")
    print("| --- | --- | --- | --- | --- |")
    for name, runtime, med, span in ratios:
        cells = [f"{med[k]:.2f} ({span[k][0]:.2f}-{span[k][1]:.2f})" for k in ("verify", "draft", "greedy")]
        print(f"| {name} | {runtime} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
