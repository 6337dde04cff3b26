"""Where a method's real batched cycles cost more or less than the replay prices them.

    python research/scripts/batch-cycle-prices.py PROFILE [BATCH] [N_PROMPTS] [PASSES] [REFIT_PROMPTS]

Runs plain decoding and a few baselines (grid, fsm, svip, ddd, qlearn) at batch BATCH on held-out
ShareGPT prompts as one queue, interleaved pass by pass as ``validate --real --batch-size`` does
(at the profile's temperature), refits the profile at that batch on REFIT_PROMPTS train prompts
(the quick ladder; 0: no refit), then prices every real cycle with the base profile and with the
refit: per method, measured / predicted seconds of each part (draft, verify, bookkeeping, policy),
of the whole run, and of the run over plain decoding's (the speedup's error). Draft levels are
also split by how many of the batch's rows drafted them. Prints a Markdown table; numpy + torch."""

from __future__ import annotations

import sys
from collections import defaultdict

import numpy as np

from simspec.data import load_prompts
from simspec.engine.sampling import Sampling
from simspec.engine.speculative import SpeculativeEngine
from simspec.measure.bench_batch import interleaved
from simspec.measure.insitu import QUICK_LADDER
from simspec.measure.insitu_batch import fit_batch
from simspec.measure.interleave import load_engine
from simspec.sim.evaluate import build_baselines, split_traces
from simspec.sim.profile import cost_model, load_profile
from simspec.sim.replay import _per_queue, cycle_costs

path = sys.argv[1]
batch, n_prompts, passes, n_refit = (int(a) for a in (sys.argv[2:] + ["4", "8", "2", "4"][len(sys.argv) - 2:]))
TOKENS = 48
profile = load_profile(path)
temperature = profile.temperature
sampling = Sampling() if temperature == 0 else Sampling(temperature, float(profile.traces().meta.top_p), 0)
held = load_prompts("sharegpt", split="heldout", n=n_prompts)
train = load_prompts("sharegpt", split="train", n=n_refit) if n_refit else []


def status(message):
    import contextlib
    print(message, file=sys.stderr)
    return contextlib.nullcontext()


engine, ids = load_engine(profile, [p.text for p in held + train], TOKENS + 12, status, sampling)
rows = SpeculativeEngine(engine.target, engine.drafter, engine.sampling, batch_size=batch)
cost_b = profile.cost.at_batch(batch)
methods = build_baselines(["grid", "fsm", "svip", "ddd", "qlearn"], split_traces(profile.traces(), "train"), cost_b,
                          TOKENS)
width = profile.meta.traces.width


def bar(label, total):
    print(label, file=sys.stderr)
    return lambda n=1: None


costs = {"base": cost_b}
if n_refit:
    refit = fit_batch(rows, profile.samples, width, [(p.id, i) for p, i in zip(train, ids[len(held):])], TOKENS, bar,
                      QUICK_LADDER)
    costs["refit"] = cost_model(refit.samples).at_batch(batch)
    print("refit scales:", refit.record["scales"], file=sys.stderr)
prompt_ids = [(p.id, i) for p, i in zip(held, ids[:len(held)])]
dot = lambda n=1: print(".", end="", file=sys.stderr)  # noqa: E731
plain, measured = interleaved(rows, prompt_ids, methods, TOKENS, passes, dot)
print(file=sys.stderr)


def price(cost, run, plain_run: bool):
    """(measured, predicted) seconds per part of one BatchRun's cycles; draft also by rows drafting."""
    m, p = defaultdict(float), defaultdict(float)
    for c in run.batch_cycles:
        if plain_run or c.depth.max() == 1:
            m["step"] += c.verify_s
            p["step"] += float(cost.greedy(c.context))
            continue
        draft, verify, book = (float(x[0]) for x in cycle_costs(cost, width, c.depth, c.size, np.zeros(1, int),
                                                                  np.array([c.context]), np.array([c.fed])))
        m["verify"] += c.verify_s
        p["verify"] += verify
        m["bookkeeping"] += c.bookkeeping_s
        p["bookkeeping"] += book
        m["draft"] += float(np.sum(c.draft_s))
        p["draft"] += draft
        m["policy"] += c.policy_s
        all_rows = int(_per_queue(np.add, (c.depth >= 2).astype(np.int64), np.zeros(1, int))[0]) == len(c.depth)
        key = "draft, all rows" if all_rows else "draft, some rows"
        m[key] += float(np.sum(c.draft_s))
        p[key] += draft
        m["deepest"] += float(c.depth.max())
        p["deepest"] += 1
    return m, p


print("| method | cost | deepest (mean) | draft | draft, all rows | draft, some rows | verify | bookkeeping | "
      "policy s/cycle | cycles | run | run / plain |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for name, cost in costs.items():
    pm, pp = defaultdict(float), defaultdict(float)
    for r in plain:
        m, p = price(cost, r, True)
        for k in m:
            pm[k] += m[k]
            pp[k] += p[k]
    plain_ratio = pm["step"] / pp["step"]
    for method, result in zip(methods, measured):
        tm, tp = defaultdict(float), defaultdict(float)
        for r in result.runs:
            m, p = price(cost, r, False)
            for k in m:
                tm[k] += m[k]
                tp[k] += p[k]
        parts = ("draft", "verify", "bookkeeping", "step")
        run_m = sum(tm[k] for k in parts) + tm["policy"]
        run_p = sum(tp[k] for k in parts) + tm["policy"]  # the policy's own time, as measured
        cycles = sum(len(r.batch_cycles) for r in result.runs)
        ratio = lambda k: f"{tm[k] / tp[k]:.3f}" if tp[k] else "-"  # noqa: E731
        print(f"| {method.name} | {name} | {tm['deepest'] / max(tp['deepest'], 1):.2f} | {ratio('draft')} | "
              f"{ratio('draft, all rows')} | {ratio('draft, some rows')} | {ratio('verify')} | "
              f"{ratio('bookkeeping')} | "
              f"{tm['policy'] / cycles * 1e3:.2f} ms | {cycles} | {run_m / run_p:.3f} | "
              f"{run_m / run_p / plain_ratio:.3f} |")
    print(f"| plain | {name} | | | | | | | | | {plain_ratio:.3f} | 1 |")
