"""Calibrate's trace recording: the drafter's trees on the chosen prompts, then the replay check."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from simspec import __version__
from simspec.measure import Bar

if TYPE_CHECKING:
    from simspec.measure.calibrate import CalibrateRequest

# (D, V) of the live engine's replay check against the recorded traces (depth_max: the deepest).
REPLAY_CHECK = ((3, 8), (6, 16), (8, 60))


def record_traces(loaded, drafter, request: CalibrateRequest, chosen: list, bar: Bar):
    """Records the drafter's trees on ``chosen``, then the replay check; returns (traces, seconds, checks)."""
    import torch

    from simspec.data import render_chat
    from simspec.engine.speculative import SpeculativeEngine
    from simspec.fingerprint import drafter_fingerprint
    from simspec.measure.recorder import RecordSpec, TraceRecorder, replay_check
    from simspec.sim.traces import assemble

    r = request
    recorder = TraceRecorder(loaded, drafter, RecordSpec(r.depth_max, r.width, r.max_new_tokens, r.sampling(),
                                                         r.nodes))
    engine = SpeculativeEngine(loaded, drafter, runtime=r.runtime)  # the replay check runs what is timed
    ids = [render_chat(loaded.tokenizer, p.text) for p in chosen]
    for one in ids:
        engine.check_length(one, r.max_new_tokens + r.depth_max)
    started = time.perf_counter()
    threads = torch.get_num_threads()
    if r.ray is not None:
        from simspec.measure.shards import record_sharded

        tick = bar(f"recording traces on Ray ({r.workers} shards, {threads} threads each)", len(ids))
        recorded = record_sharded(r.target, r.draft, r.dtype, recorder.spec, ids, r.ray, r.workers, threads, tick)
    else:
        recorded = recorder.record_all(ids, bar)
    record_s = time.perf_counter() - started
    meta = {"target": r.target, "draft": r.draft, "prompts": r.prompts, "prompt_ids": [p.id for p in chosen],
            "splits": [p.split for p in chosen], "max_new_tokens": r.max_new_tokens, "depth_max": r.depth_max,
            "width": r.width, "seed": r.seed, "simspec_version": __version__, "dtype": r.dtype,
            "near_tie_cuts": int(sum(x.near_tie_cut for x in recorded)), "record_seconds": round(record_s, 1),
            "temperature": r.temperature, "threads": threads, "draft_fingerprint": drafter_fingerprint(r.draft)}
    if r.ray is not None:
        meta["ray"] = {"address": r.ray, "shards": r.workers}
    if r.temperature > 0:
        meta.update(top_p=r.top_p, nodes=r.nodes)
    traces = assemble(recorded, ids, meta)
    checks = []
    # The check compares each cycle's length with the trace's; at T > 0 lengths are random.
    if r.check_prompts and r.temperature == 0:
        k = min(r.check_prompts, len(ids))
        configs = [*REPLAY_CHECK, (r.depth_max, 240)]
        tick = bar("replay check (live engine)", k * len(configs))
        checks = replay_check(engine, traces, ids[:k], configs, min(r.check_tokens, r.max_new_tokens), tick)
    return traces, record_s, checks
