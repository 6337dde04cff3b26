"""The in-situ refit at batch size B (``--recalibrate`` with ``validate --real --batch-size B`` or
``load --live``): as at batch 1 (``simspec.measure.insitu``), but the train prompts run as one
queue through the engine's B rows, as the scored runs will, every batched cycle priced as the
batch replay prices it (``DriftMeter.batch``). The ladder keeps the sizes the verify curve at B
covers (beyond, a ratio would scale an extrapolation). Plain decoding runs before every
``PLAIN_EVERY`` trees and after the last: its time divides every speedup, so its ratio must not
rest on one run, which a shared machine's hiccup can move by several per cent."""

from __future__ import annotations

import time

from simspec.errors import SimspecError
from simspec.measure import Bar
from simspec.measure.insitu import LADDER, InSitu, check_lossless, in_situ_record, ladder_trees
from simspec.sim.profile import Profile

WARM_UP_TOKENS = 8  # a first short queue, plain and speculative: allocators grow before the timed runs
PLAIN_EVERY = 4


def batch_ladder(profile: Profile, batch: int) -> list[tuple[int, int]]:
    """``LADDER``'s (depth, V) whose V the profile's verify curve at ``batch`` reaches."""
    sizes = [r["n"] for r in profile.samples if r["kind"] == "verify" and r.get("batch", 1) == batch]
    if not sizes:
        raise SimspecError(f"profile {profile.directory} has no verify curve at batch size {batch} to refit: "
                           f"measure it with `simspec calibrate --batch-sizes 1,{batch}`")
    return [point for point in LADDER if point[1] <= max(sizes)]


def refit_batch(engine, profile: Profile, prompts: list[tuple[str, list[int]]], max_new_tokens: int,
                bar: Bar) -> InSitu:
    """The ladder on train ``prompts`` as one queue through ``engine``'s B rows; the curves at B refitted."""
    from simspec.measure.bench_batch import divergences
    from simspec.measure.interleave import DriftMeter
    from simspec.measure.refit import refit_samples

    batch, width = engine.batch, profile.meta.traces.width
    points = batch_ladder(profile, batch)
    trees = ladder_trees(width, points)
    queue = [ids for _, ids in prompts]
    greedy = engine.sampling.greedy
    seeds = None if greedy else [engine.sampling.seed + 1_000_000 + p for p in range(len(queue))]
    engine.decode(queue[:batch], None, WARM_UP_TOKENS)
    engine.decode(queue[:batch], trees[len(trees) // 2], WARM_UP_TOKENS)
    started = time.perf_counter()
    plain_runs = len(trees) // PLAIN_EVERY + 1
    tick = bar(f"in-situ runs at batch {batch} (plain + static trees, interleaved)",
               len(prompts) * (len(trees) + plain_runs))
    drift = DriftMeter(profile.cost.at_batch(batch), width)
    reference, diverged, cycles = None, [], 0
    for i in range(len(trees) + 1):
        if i % PLAIN_EVERY == 0 or i == len(trees):
            plain = engine.decode(queue, None, max_new_tokens, seeds)
            drift.batch(plain, plain=True)
            reference = reference or plain
            tick(len(queue))
        if i == len(trees):
            break
        run = engine.decode(queue, trees[i], max_new_tokens, seeds)
        drift.batch(run, plain=False)
        cycles += run.cycles
        tick(len(queue))
        if greedy and not all(d["near_tie"] for d in divergences(engine, prompts, run, reference)):
            diverged.append(trees[i].name)
    check_lossless(diverged, batch)
    samples, scales = refit_samples(profile.samples, drift, batch)
    record = in_situ_record(prompts, max_new_tokens, points, drift, scales, time.perf_counter() - started,
                            batch_size=batch, plain_runs=plain_runs, cycles=int(cycles))
    return InSitu(samples, record)
