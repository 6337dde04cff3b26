"""``validate --real --batch-size B`` (B > 1): the prompt set as one queue through B rows, plain
decoding and every method interleaved pass by pass, scored against the replay of the same queue
at B; at T > 0 each pass samples with its own seeds (``bench_batch.pass_seeds``), every method alike."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from simspec import __version__
from simspec.report.validation_batch import BATCH_REPORT_SCHEMA, BATCH_REPORT_VERSION, BatchValidationReport
from simspec.sim.charge import DecisionCharge


def validate_batch(request, bar, status: Callable[[str], object], checked) -> tuple[BatchValidationReport, Path]:
    """Runs ``validate --real`` at ``request.batch_size``; returns the report and its folder."""
    from simspec.machine import device_label, device_model
    from simspec.measure.bench_batch import interleaved
    from simspec.measure.insitu_batch import BatchRefit
    from simspec.measure.interleave import DriftMeter
    from simspec.measure.validate import (
        inputs_hash,
        profile_block,
        refitted_profile,
        scored_traces,
        setup_run,
        write_run,
    )
    from simspec.report.validation import error_summary, measurement_noise
    from simspec.report.validation_batch import render_markdown
    from simspec.sim.replay import replay

    started = time.perf_counter()
    s = setup_run(request, checked, bar, status)
    batch, profile, target, methods = request.batch_size, s.profile, s.engine.target, s.methods
    traces, _ = scored_traces(request, s.base, s.engine, s.chosen, s.ids, bar)
    # at T > 0 a queue per pass, on that pass's sampled traces
    queues = np.arange(traces.n_prompts).reshape(1 if s.engine.sampling.greedy else request.repeats, -1)

    def simulate(cost) -> dict:  # every method's queues replayed at B, priced by ``cost``
        return {m.name: replay(traces, cost, m, s.tokens, s.charged.get(m.family, DecisionCharge.flat(0.0)),
                               s.engine.sampling.seed, queues, batch=batch) for m in methods}

    simulated = simulate(profile.cost)
    co_timed = (BatchRefit(s.rows, s.base.samples, s.base.meta.traces.width, s.refit_on, s.tokens, s.ladder,
                           f"profile {s.base.directory}") if s.refit_on else None)
    tick = bar(f"real runs at batch {batch} (plain + every method, interleaved)"
               + (", refit co-timed" if co_timed else ""), (len(methods) + 1) * request.repeats * len(s.ids))
    plain, measured = interleaved(s.rows, [(p.id, i) for p, i in zip(s.chosen, s.ids)], methods, s.tokens,
                                  request.repeats, tick, None if co_timed is None else co_timed.step)
    drift = DriftMeter(profile.cost.at_batch(batch), s.width)  # the scored runs against the curves at B
    for run in plain:
        drift.batch(run, plain=True)
    for run in [r for real in measured for r in real.runs]:
        drift.batch(run, plain=False)
    rows = _rows(methods, measured, simulated)
    errors = [abs(r["rel_error"]) for r in rows]
    # what the passes' scatter alone gives an exact simulator: each pass's real / predicted speedup
    noise = measurement_noise([{"method": r["method"], "repeat_medians": np.divide(
        r["speedup_real_passes"], r["speedup_sim_passes"]).tolist()} for r in rows])
    report = {
        "schema": BATCH_REPORT_SCHEMA, "schema_version": BATCH_REPORT_VERSION, "simspec_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "batch_size": batch,
        "device": device_label(str(target.device)), "device_model": device_model(str(target.device)),
        "target": profile.meta.target, "draft": profile.meta.draft, "dtype": profile.dtype,
        "profile": {**profile_block(request, s), "batch_sizes": profile.cost.batch_sizes,
                    "refit_seconds": s.refit.record["seconds"] if s.refit else None},
        "prompts": request.prompts, "split": request.split, "n_prompts": len(s.chosen),
        "prompt_ids": [p.id for p in s.chosen], "max_new_tokens": s.tokens, "repeats": request.repeats,
        **s.engine.sampling.describe(), "traces_hash": traces.content_hash(), "baselines": list(request.baselines),
        "policies": list(request.policies), "decision_seconds_charged": {  # per batch cycle
            name: float(run.decision_seconds.sum() / max(run.cycles.sum(), 1)) for name, run in simulated.items()},
        "rows": rows, "mean_abs_rel_error": float(np.mean(errors)), "max_abs_rel_error": float(np.max(errors)),
        "plain_tokens_per_s_real": float(np.median([p.tokens_per_s for p in plain])),
        "plain_cycles_real": float(np.mean([p.cycles for p in plain])),
        "plain_cycles_sim": float(next(iter(simulated.values())).plain_cycles.mean()),
        "live_over_profile": {op: round(r, 4) for op, r in drift.ratios().items()}, "measurement_noise": noise,
        "warnings": s.notes, "seconds": round(time.perf_counter() - started, 1),
    }
    profiles = {"profile": profile} if s.refit else {}
    if co_timed is not None:  # the same queues predicted by the refit timed alongside the scored runs
        refit_co = co_timed.result(co_timed=True)
        profiles["profile-cotimed"] = refitted_profile(request, s, refit_co, "profile-cotimed")
        again = simulate(profiles["profile-cotimed"].cost)
        co_rows = [{"method": r["method"], "speedup_real": r["speedup_real"], "speedup_sim": (sim := again[
            r["method"]].set_speedup), "rel_error": sim / r["speedup_real"] - 1} for r in rows]
        report["co_timed_refit"] = {"rows": co_rows, **error_summary(co_rows), "refit": refit_co.record}
    report["inputs_hash"] = inputs_hash(report, "policies", "batch_size")
    return write_run(s.out_dir, request.force, report, BatchValidationReport, render_markdown, profiles), s.out_dir


def _rows(methods: list, measured: list, simulated: dict) -> list[dict]:
    """A method's real speedup at B beside the replayed queue's, and pass by pass (greedy: one queue,
    the same prediction for every pass)."""
    rows = []
    for method, real in zip(methods, measured):
        sim = simulated[method.name]
        passes = np.broadcast_to(sim.speedup, len(real.ratios)).tolist()
        rows.append({"method": method.name, "speedup_real": real.speedup, "speedup_real_passes": real.ratios,
                     "speedup_sim": sim.set_speedup, "speedup_sim_passes": passes,
                     "rel_error": sim.set_speedup / real.speedup - 1,
                     "tokens_per_s_real": real.tokens_per_s, "cycles_real": real.cycles,
                     "cycles_sim": float(sim.cycles.mean()), "lossless": real.lossless,
                     # the drafter's batched forwards, one per level of a cycle's deepest row: how deep it drafted
                     "draft_calls_real": float(np.mean([r.draft_forwards for r in real.runs])),
                     "draft_calls_sim": float(sim.draft_calls.mean()),
                     "exact_match": None if real.sampled else not real.divergences, "pit_p": real.pit_p,
                     "divergences": real.divergences})
    return rows

