"""docs/results/engine.md#one-engine: the batch-native engine against the engines it replaced (the
batch-1 ``SpeculativeEngine`` and the batched ``BatchEngine`` of commit OLD), in one process,
interleaved pass by pass (who goes first alternates): plain decoding's tokens/s and every tree's
speedup over its own engine's plain decoding, at batch 1 and batch 4, eager and compiled.

The previous package is extracted from git (``git archive OLD simspec``) into a temporary folder
as ``simspec_old`` (its imports renamed), so both load side by side; each loads its own copy of
the target and the drafter.

    .venv/bin/python research/scripts/engine-vs-previous.py [OLD] [PASSES] [N_PROMPTS] [NEW_TOKENS] [POINTS]

POINTS: which (batch, runtime) pairs, e.g. ``1:eager,4:compiled`` (default: all four).

Prints a JSON line per (batch, runtime, method) and engine: tokens/s per pass and median; then
per (batch, runtime) the new/old ratio of plain tokens/s and of each tree's speedup (median over
passes, with min and max), and whether both engines' outputs are equal (greedy: they must be)."""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
TREES = {1: [(3, 1, 4), (5, 4, 12), (6, 8, 32)], 4: [(3, 4, 4), (4, 4, 8)]}


def old_package(commit: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="simspec-old-"))
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "simspec"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    (folder / "simspec").rename(folder / "simspec_old")
    for path in (folder / "simspec_old").rglob("*.py"):
        text = re.sub(r"\bsimspec\.(?=[a-z_])", "simspec_old.", path.read_text())
        text = text.replace("from simspec import", "from simspec_old import")
        path.write_text(text)
    return folder


def engines(old, batch: int, runtime: str):
    """(new engine, new StaticPolicy), (old engine, old StaticPolicy) at this batch and runtime."""
    from simspec.engine.load import load_pair
    from simspec.engine.speculative import SpeculativeEngine
    from simspec.policies.base import StaticPolicy

    target, drafter = load_pair("smollm2-135m-instruct", "eagle")
    new = SpeculativeEngine(target, drafter, runtime=runtime, batch_size=batch)
    o_target, o_drafter = old.load.load_pair("smollm2-135m-instruct", "eagle")
    if old.batch is None:  # OLD had the one engine already
        prev = old.speculative.SpeculativeEngine(o_target, o_drafter, runtime=runtime, batch_size=batch)
    elif batch == 1:
        prev = old.speculative.SpeculativeEngine(o_target, o_drafter, runtime=runtime)
    else:
        prev = old.batch.BatchEngine(o_target, o_drafter, batch, runtime)
    return (new, StaticPolicy), (prev, old.base.StaticPolicy)


def run(engine, policy, batch: int, prompts, tokens: int) -> tuple[float, list]:
    """Tokens/s over the prompt set and the outputs."""
    if batch == 1:
        started, outs = time.perf_counter(), []
        for p in prompts:
            outs.append((engine.plain(p, tokens) if policy is None else engine.generate(p, policy, tokens)).tokens)
        return sum(map(len, outs)) / (time.perf_counter() - started), outs
    if hasattr(engine, "decode"):
        result = engine.decode(prompts, policy, tokens)
    else:
        result = engine.plain(prompts, tokens) if policy is None else engine.generate(prompts, policy, tokens)
    return result.tokens_per_s, [g.tokens for g in result.generations]


def main() -> None:
    args = sys.argv[1:] + ["HEAD~1", "5", "8", "48", "1:eager,1:compiled,4:eager,4:compiled"][len(sys.argv) - 1:]
    commit, passes, n_prompts, tokens = args[0], int(args[1]), int(args[2]), int(args[3])
    points = [(int(b), r) for b, r in (point.split(":") for point in args[4].split(","))]
    torch.set_num_threads(2)
    os.environ.setdefault("SIMSPEC_SHIPPED", str(ROOT))  # the old package finds the shipped drafters here
    sys.path.insert(0, str(old_package(commit)))
    import importlib
    from types import SimpleNamespace

    from simspec.machine import device_model

    def module(name: str):
        try:
            return importlib.import_module(f"simspec_old.{name}")
        except ModuleNotFoundError:  # engine.batch: gone once one engine served every batch size
            return None

    old = SimpleNamespace(load=module("engine.load"), speculative=module("engine.speculative"),
                          batch=module("engine.batch"), base=module("policies.base"))
    print(json.dumps({"device": device_model("cpu"), "old": commit, "passes": passes, "prompts": n_prompts,
                      "tokens": tokens}), flush=True)
    for batch, runtime in points:
        compare(old, batch, runtime, passes, n_prompts, tokens)


def compare(old, batch: int, runtime: str, passes: int, n_prompts: int, tokens: int) -> None:
    from simspec.data import load_prompts, render_chat

    pair = engines(old, batch, runtime)
    tokenizer = pair[0][0].target.tokenizer
    prompts = [render_chat(tokenizer, p.text) for p in load_prompts("sharegpt", split="heldout", n=n_prompts)]
    methods = [None, *TREES[batch]]
    for engine, _ in pair:
        engine.warm_up([len(p) for p in prompts], tokens, [t[2] for t in TREES[batch]])
    outputs, tps = {}, {}
    for k in range(passes + 1):  # pass 0 untimed: compiles what warm_up missed, checks outputs
        order = pair if k % 2 == 0 else pair[::-1]
        for method in methods:
            for (engine, static), label in zip(order, ("new", "old") if k % 2 == 0 else ("old", "new")):
                speed, outs = run(engine, None if method is None else static(*method), batch, prompts, tokens)
                outputs.setdefault((label, method), outs)
                if k:
                    tps.setdefault((label, method), []).append(speed)
    same = all(outputs["new", m] == outputs["old", m] for m in methods)
    lossless = all(outputs[e, m] == outputs[e, None] for e in ("new", "old") for m in methods)
    for (label, method), speeds in tps.items():
        print(json.dumps({"batch": batch, "runtime": runtime, "engine": label, "method": str(method),
                          "tokens_per_s": np.round(speeds, 2).tolist(), "median": round(float(np.median(speeds)), 2)}),
              flush=True)
    ratios = {}
    for method in methods:  # per pass: new/old plain tokens/s, or new/old speedup over own plain
        per_pass = [(tps["new", method][i] / (1 if method is None else tps["new", None][i]))
                    / (tps["old", method][i] / (1 if method is None else tps["old", None][i])) for i in range(passes)]
        ratios[str(method) if method else "plain tokens/s"] = {
            "median": round(float(np.median(per_pass)), 3), "min": round(min(per_pass), 3),
            "max": round(max(per_pass), 3)}
    print(json.dumps({"batch": batch, "runtime": runtime, "new_over_old": ratios, "outputs_equal": same,
                      "lossless": lossless}), flush=True)


if __name__ == "__main__":
    main()
