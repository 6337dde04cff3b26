"""Where a load replay's latencies part from the live engine's, request by request and cycle by cycle.

`simspec load --live` compares percentiles. This serves one Poisson stream on the live engine (as
`load --live` does: every cycle at --max-batch rows, after the same warm-up) and replays the same
stream from the profile alone, then holds the two apart: each request's time to first token and
time per output token, each prefill against its price, and each batched cycle against its price
(the plain step at the longest busy row's context, or a tree's draft + verify + bookkeeping), in
the order the engine ran them. Nothing real enters the prediction.

    .venv/bin/python research/scripts/load-per-request.py --profile calibration/cpu-sharegpt-batch \
        --rate 0.3 --duration 120 --methods plain,static:4,8 --out research/runs/load/per-request
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from pathlib import Path

import numpy as np

from simspec.engine.speculative import SpeculativeEngine
from simspec.measure.insitu_batch import WARM_UP_TOKENS
from simspec.measure.interleave import load_engine
from simspec.measure.load import COMPARED
from simspec.sim.evaluate import build_baselines, decision_charges, methods_flag, split_traces
from simspec.sim.load import DecisionCharge, LoadResult, replay_load
from simspec.sim.profile import load_profile
from simspec.sim.stream import poisson


def pct(x) -> dict:
    x = np.asarray(x, float)
    return {q: round(float(np.percentile(x, q)), 4) for q in (10, 50, 90)} if len(x) else {}


def cycle_prices(cost, run) -> np.ndarray:
    """Each real plain step's price at the run's (padded) batch and its longest busy row's context,
    as the replay charges it (NaN for a speculative cycle: its price depends on the trees' rows)."""
    plain = [int(c.size.max()) == 1 and c.draft_s == 0.0 for c in run.batch_cycles]
    context = np.array([c.context for c in run.batch_cycles])
    return np.where(plain, cost.greedy_steps(np.maximum(context, 1)), np.nan)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="calibration/cpu-sharegpt-batch")
    ap.add_argument("--rate", type=float, default=0.3)
    ap.add_argument("--duration", type=float, default=120.0)
    ap.add_argument("--max-batch", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--methods", default="plain")
    ap.add_argument("--compare", default="", help="more profiles (comma-separated) replaying the same streams")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()

    profile = load_profile(a.profile)
    traces = profile.traces()
    held, train = split_traces(traces, "heldout"), split_traces(traces, "train")
    cost = profile.cost.at_batch(a.max_batch)
    specs = [m for m in methods_flag(a.methods, "--methods") if m != "plain"]
    methods = [None, *build_baselines(specs, train, profile.cost, a.tokens)]
    charges = decision_charges(profile.meta)
    stream = poisson(a.rate, a.duration, np.arange(held.n_prompts), a.seed)
    ids = [t.tolist() for t in held.prompt_token_lists()]
    engine, _ = load_engine(profile, [], a.tokens, lambda text: contextlib.nullcontext())
    rows = SpeculativeEngine(engine.target, engine.drafter, engine.sampling, batch_size=a.max_batch)
    longest = sorted(ids, key=len)[-a.max_batch:]
    for method in methods:
        rows.decode(longest, method, WARM_UP_TOKENS)
    prompts = [ids[p] for p in stream.prompt]
    report = {"profile": a.profile, "rate": a.rate, "duration_s": a.duration, "max_batch": a.max_batch,
              "tokens": a.tokens, "seed": a.seed, "requests": len(prompts),
              "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "methods": []}
    for method in methods:
        name = "plain" if method is None else method.name
        run = rows.decode(prompts, method, a.tokens, arrivals=list(stream.arrival))
        charge = charges.get(method.family, DecisionCharge.flat(0.0)) if method else 0.0
        sim = replay_load(held, profile.cost, method, stream, a.max_batch, a.tokens, charge, a.seed, padded=True)
        gens = run.generations
        arrival = np.asarray(stream.arrival, float)
        real_first = np.array([g.first_token_at for g in gens])
        real_done = np.array([g.finished_at for g in gens])
        n = np.array([len(g.tokens) for g in gens])
        real_tpot = (real_done - real_first) / np.maximum(n - 1, 1)
        prefill_real = np.array([g.prefill_s for g in gens])
        prefill_price = cost.prefill(held.prompt_lengths[np.asarray(stream.prompt)])
        cyc_real = np.array([c.draft_s + c.verify_s + c.policy_s + c.bookkeeping_s for c in run.batch_cycles])
        cyc_price = cycle_prices(cost, run)
        busy = np.array([len(c.size) for c in run.batch_cycles])
        tpot_ratio = sim.tpot / real_tpot
        row = {"method": name, "cycles": [run.cycles, sim.cycles],
               "tokens_sim_vs_real": [int(sim.tokens.sum()), int(n.sum())],
               "total_s_real": round(run.total_s, 2), "span_sim_s": round(sim.span, 2),
               "ttft_real": pct(real_first - arrival), "ttft_sim": pct(sim.ttft),
               "tpot_real": pct(real_tpot), "tpot_sim": pct(sim.tpot), "tpot_sim_over_real": pct(tpot_ratio),
               "prefill": {"real_s": round(float(prefill_real.sum()), 3),
                           "priced_s": round(float(prefill_price.sum()), 3),
                           "ratio_per_request": pct(prefill_price / prefill_real)},
               "cycles_time": {"real_s": round(float(cyc_real.sum()), 3),
                               "plain_steps_priced_over_real": round(float(np.nansum(cyc_price)
                                                                           / cyc_real[~np.isnan(cyc_price)].sum()), 4)
                               if (~np.isnan(cyc_price)).any() else None,
                               "ratio_per_plain_step": pct(cyc_price[~np.isnan(cyc_price)]
                                                           / cyc_real[~np.isnan(cyc_price)]),
                               "real_s_by_busy_rows": {int(b): {"cycles": int((busy == b).sum()),
                                                                "median_s": round(float(np.median(cyc_real[busy == b])),
                                                                                  4)}
                                                       for b in np.unique(busy)}},
               "plain_steps": {"busy_rows": busy.tolist(), "context": [c.context for c in run.batch_cycles],
                               "real_s": np.round(cyc_real, 5).tolist(),
                               "priced_s": [None if np.isnan(x) else round(float(x), 5) for x in cyc_price],
                               "priced_at_batch_1_s": np.round(cycle_prices(profile.cost.at_batch(1), run),
                                                               5).tolist()},
               "unaccounted_s": round(run.total_s - float(cyc_real.sum()) - float(prefill_real.sum()), 3),
               "worst_tpot_requests": [
                   {"request": int(i), "prompt_tokens": len(prompts[i]), "tokens": int(n[i]),
                    "tpot_real": round(float(real_tpot[i]), 4), "tpot_sim": round(float(sim.tpot[i]), 4)}
                   for i in np.argsort(real_tpot)[-5:]]}
        real_summary = LoadResult(name, arrival, real_first, real_done, n, run.cycles).summary()
        row["errors"] = {}
        for other in [a.profile, *filter(None, a.compare.split(","))]:
            priced = replay_load(held, load_profile(other).cost, method, stream, a.max_batch, a.tokens, charge, a.seed,
                                 padded=True).summary()
            row["errors"][other] = {k: round(priced[k] / real_summary[k] - 1, 4) for k in COMPARED}
        print(json.dumps({k: v for k, v in row.items() if k != "plain_steps"}), flush=True)
        report["methods"].append(row)
    if a.out:
        Path(a.out).mkdir(parents=True, exist_ok=True)
        (Path(a.out) / f"rate-{a.rate:g}.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
