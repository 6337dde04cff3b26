"""The in-situ refit at batch size B (``validate --real --recalibrate --batch-size B``).

As at batch 1 (``simspec.measure.insitu``): plain decoding and a ladder of static trees run on
train prompts of the scored set (never the scored ones), interleaved, and the profile's curves
are scaled by the live / profile ratios. Here the prompts run as one queue through the batched
engine's B rows, exactly as the scored runs will, and every batched cycle is held against the
profile's curves at B, priced as the batch replay prices it (``DriftMeter.batch``): verify and
bookkeeping per largest tree of the cycle, the plain step per longest context, drafting and
the prefill by one ratio each. The curves scaled are those that price a cycle at B
(``simspec.measure.refit``); batch 1's stay as calibrated.

The ladder keeps the trees whose size the profile's verify curve at B covers (``calibrate
--batch-sizes`` measures it to V = 64): beyond, a ratio would scale an extrapolation. Plain
decoding runs before every ``PLAIN_EVERY`` trees and after the last: its time divides every
speedup, so its ratio must not rest on one queue's run, which a shared machine's hiccup can
move by several per cent; spread over the refit, it is also timed across the same minutes as
the trees. At T > 0 every queue samples with seeds no scored run uses, and the outputs are not
compared (sampled text differs from run to run; the scored runs' PIT test judges the engine's law)."""

from __future__ import annotations

import time

from simspec.errors import SimspecError
from simspec.measure.insitu import LADDER, Bar, InSitu, ladder_trees
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
    """Runs the train ``prompts`` as one queue through ``engine``'s rows (a ``SpeculativeEngine`` of B rows),
    plainly and with every ladder tree, interleaved, and scales the profile's curves at the
    engine's batch size to the live cycles."""
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
    if diverged:  # a lossless engine never gets here; refuse to build on one that is not
        raise SimspecError(f"{', '.join(diverged)} diverged from greedy decoding during recalibration at batch "
                           f"{batch}: the engine is not lossless here; run `simspec bench-engine --batch-size "
                           f"{batch}` and report it")
    samples, scales = refit_samples(profile.samples, drift, batch)
    return InSitu(samples, {
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "split": "train", "batch_size": batch,
        "prompt_ids": [pid for pid, _ in prompts], "max_new_tokens": max_new_tokens,
        "trees": [list(t) for t in points], "plain_runs": plain_runs, "cycles": int(cycles),
        "live_over_profile": {op: round(r, 4) for op, r in drift.ratios().items()},
        "scales": scales, "seconds": round(time.perf_counter() - started, 1),
    })
