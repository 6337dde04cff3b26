"""``validate --real --batch-size B`` (B > 1): the prompt set as one queue through B rows of the
engine at batch B (``simspec.engine.speculative``), plain decoding and every method, interleaved pass by
pass (the order rotates), scored against the simulator's replay of the same queue
(``simspec.sim.replay`` at B) on traces recorded here for the same prompts.

At T > 0 (a profile recorded with ``--temperature``) each pass samples its queue with its own
seeds (``bench_batch.pass_seeds``), plain decoding and every method alike; the scored traces are
one sampled continuation per (pass, prompt) with those seeds, each pass's queue is replayed with
acceptance drawn from its trees' law, and the outputs are judged by their PIT under the target.

Baselines are tuned on the profile's train split with its curves at B. With ``--recalibrate``
those curves are first refitted in situ at B (``simspec.measure.insitu_batch``) on train prompts
of the scored set, through the same rows, and the refitted profile predicts (saved in
RUN/profile/)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from simspec import __version__
from simspec.report.validation_batch import BATCH_REPORT_SCHEMA, BATCH_REPORT_VERSION, BatchValidationReport
from simspec.sim.charge import DecisionCharge


def validate_batch(request, bar, status: Callable[[str], object], checked) -> tuple[BatchValidationReport, Path]:
    from simspec.engine.speculative import SpeculativeEngine
    from simspec.machine import device_model
    from simspec.measure.bench_batch import interleaved
    from simspec.measure.curves import device_name
    from simspec.measure.insitu import LADDER, check_device, refitted_meta
    from simspec.measure.insitu_batch import refit_batch
    from simspec.measure.interleave import load_engine
    from simspec.measure.validate import scored_traces
    from simspec.sim.evaluate import method_set, split_traces
    from simspec.sim.profile import build_profile

    profile, chosen = checked
    base, batch = profile, request.batch_size
    started = time.perf_counter()
    warning = check_device(profile, request.allow_other_device, refit=request.recalibrate)
    ref = profile.meta.traces
    depth_max, width, tokens = ref.depth_max, ref.width, request.tokens()
    refit_on = request.refit_prompts()
    room = tokens + max(depth_max, *(d for d, _ in LADDER)) if refit_on else tokens + depth_max
    engine, all_ids = load_engine(profile, [p.text for p in chosen + refit_on], room, status,
                                  request.sampling(profile))
    ids, refit_ids = all_ids[:len(chosen)], all_ids[len(chosen):]
    target, drafter = engine.target, engine.drafter
    engine_rows = SpeculativeEngine(target, drafter, engine.sampling, batch_size=batch)
    out_dir = request.out_dir()
    refit = None
    if refit_on:  # the profile that predicts: refitted here, now, at B, on the set's train split
        refit = refit_batch(engine_rows, base, [(p.id, i) for p, i in zip(refit_on, refit_ids)], tokens, bar)
        profile = build_profile(out_dir / "profile", refitted_meta(
            base, request.profile, refit, request.prompts, out_dir / "profile", str(target.device)), refit.samples)
        profile._traces = base.traces()  # the same traces, already read and checked
    with status(f"tuning baselines on the profile's train split, priced at batch {batch}"):
        train = split_traces(profile.traces(), "train")
        at_batch = SimpleNamespace(meta=profile.meta, cost=profile.cost.at_batch(batch))
        methods, charged, notes = method_set(list(request.baselines), list(request.policies), at_batch, train, tokens)
    if warning:
        notes = [warning, *notes]
    traces, _ = scored_traces(request, base, engine, chosen, ids, bar)
    simulated = _simulate(traces, profile.cost, methods, charged, batch, tokens, engine.sampling, request.repeats)

    tick = bar(f"real runs at batch {batch} (plain + every method, interleaved)",
               (len(methods) + 1) * request.repeats * len(ids))
    plain, measured = interleaved(engine_rows, [(p.id, i) for p, i in zip(chosen, ids)], methods, tokens,
                                  request.repeats, tick)
    drift = _drift(profile.cost.at_batch(batch), width, plain, measured)
    rows = _rows(methods, measured, simulated)
    errors = [abs(r["rel_error"]) for r in rows]
    any_sim = next(iter(simulated.values()))
    report = {
        "schema": BATCH_REPORT_SCHEMA, "schema_version": BATCH_REPORT_VERSION, "simspec_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "batch_size": batch,
        "device": device_name(target), "device_model": device_model(str(target.device)),
        "target": profile.meta.target, "draft": profile.meta.draft, "dtype": profile.dtype,
        "profile": {"name": f"{base.directory.name}, refitted in this run" if refit else base.directory.name,
                    "path": str(request.profile), "hash": profile.meta.inputs_hash,
                    "created": profile.meta.created, "batch_sizes": profile.cost.batch_sizes,
                    # "this run": refitted at B by --recalibrate right before the runs, saved in RUN/profile/
                    "refit": "this run" if refit else None,
                    "refit_live_over_profile": refit.record["live_over_profile"] if refit else None,
                    "refit_seconds": refit.record["seconds"] if refit else None},
        "prompts": request.prompts, "split": request.split, "n_prompts": len(chosen),
        "prompt_ids": [p.id for p in chosen], "max_new_tokens": tokens, "repeats": request.repeats,
        **engine.sampling.describe(), "traces_hash": traces.content_hash(), "baselines": list(request.baselines),
        "policies": list(request.policies), "decision_seconds_charged": {  # per batch cycle
            name: float(run.decision_seconds.sum() / max(run.cycles.sum(), 1)) for name, run in simulated.items()},
        "rows": rows, "mean_abs_rel_error": float(np.mean(errors)), "max_abs_rel_error": float(np.max(errors)),
        "plain_tokens_per_s_real": float(np.median([p.tokens_per_s for p in plain])),
        "plain_cycles_real": float(np.mean([p.cycles for p in plain])),
        "plain_cycles_sim": float(any_sim.plain_cycles.mean()),
        "live_over_profile": {op: round(r, 4) for op, r in drift.ratios().items()},
        "warnings": notes, "seconds": round(time.perf_counter() - started, 1),
    }
    hashed = {k: report[k] for k in ("profile", "baselines", "policies", "prompt_ids", "max_new_tokens", "repeats",
                                     "traces_hash", "simspec_version", "batch_size")}
    report["inputs_hash"] = hashlib.sha256(json.dumps(hashed, sort_keys=True).encode()).hexdigest()[:16]
    return _write(report, out_dir, request.force, profile if refit else None), out_dir


def _simulate(traces, cost, methods: list, charged: dict, batch: int, tokens: int, sampling, repeats: int) -> dict:
    """Each method's replay of the scored queue; at T > 0 each pass's queue on its own sampled
    traces (pass r's prompts follow pass r - 1's in ``traces``): a queue per pass."""
    from simspec.sim.replay import replay

    passes = 1 if sampling.greedy else repeats
    queues = np.arange(traces.n_prompts).reshape(passes, -1)
    return {m.name: replay(traces, cost, m, tokens, charged.get(m.family, DecisionCharge.flat(0.0)),
                           sampling.seed, queues, batch=batch) for m in methods}


def _drift(cost, width: int, plain: list, measured: list):
    """The scored runs held against the predicting curves at B (after the fact: nothing is fitted
    on them): where the live machine ran off the profile while they ran, operation by operation."""
    from simspec.measure.interleave import DriftMeter

    drift = DriftMeter(cost, width)
    for run in plain:
        drift.batch(run, plain=True)
    for real in measured:
        for run in real.runs:
            drift.batch(run, plain=False)
    return drift


def _rows(methods: list, measured: list, simulated: dict) -> list[dict]:
    """A method's real speedup at B beside the replayed queue's."""
    rows = []
    for method, real in zip(methods, measured):
        sim = simulated[method.name]
        rows.append({"method": method.name, "speedup_real": real.speedup, "speedup_real_passes": real.ratios,
                     "speedup_sim": sim.set_speedup, "rel_error": sim.set_speedup / real.speedup - 1,
                     "tokens_per_s_real": real.tokens_per_s, "cycles_real": real.cycles,
                     "cycles_sim": float(sim.cycles.mean()), "lossless": real.lossless,
                     "exact_match": None if real.sampled else not real.divergences, "pit_p": real.pit_p,
                     "divergences": real.divergences})
    return rows


def _write(report: dict, out_dir: Path, force: bool, refitted) -> BatchValidationReport:
    """The run folder, whole or not at all; ``refitted``: the predicting profile (--recalibrate)."""
    from simspec.cache import atomic_directory
    from simspec.report.validation_batch import render_markdown
    from simspec.sim.profile import save_profile

    stored = json.loads(json.dumps(report))
    typed = BatchValidationReport.check(stored, out_dir / "report.json", "this is a bug in simspec")
    with atomic_directory(out_dir, replace=force) as tmp:
        if refitted is not None:  # the predicting profile, reusable: `validate --simulated --profile RUN/profile`
            save_profile(refitted, tmp / "profile")
        (tmp / "report.json").write_text(json.dumps(stored, indent=1))
        (tmp / "report.md").write_text(render_markdown(typed))
    return typed
