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


def batch_ladder(samples: list[dict], batch: int, points=LADDER, label: str = "the profile") -> list[tuple[int, int]]:
    """The ladder's (depth, V) whose V the verify curve at ``batch`` in ``samples`` reaches."""
    sizes = [r["n"] for r in samples if r["kind"] == "verify" and r.get("batch", 1) == batch]
    if not sizes:
        raise SimspecError(f"{label} has no verify curve at batch size {batch} to refit: "
                           f"measure it with `simspec calibrate --batch-sizes 1,{batch}`")
    return [point for point in points if point[1] <= max(sizes)]


class BatchRefit:
    """The ladder at batch B on the train queue, one run per ``step()`` in a fixed order (plain
    decoding before every ``PLAIN_EVERY`` trees and after the last; then again from the start), its
    runs priced against the profile's curves at B. ``refit_batch`` runs the whole order at once;
    ``validate --real --batch-size B --recalibrate`` spreads a second one over its scored runs, so
    that it is timed over the same minutes as the runs it predicts (co-timed)."""

    def __init__(self, engine, samples: list[dict], width: int, prompts: list[tuple[str, list[int]]],
                 max_new_tokens: int, points=LADDER, label: str = "the profile") -> None:
        from simspec.measure.interleave import DriftMeter
        from simspec.sim.profile import cost_model

        self.engine, self.samples, self.prompts, self.max_new_tokens = engine, samples, prompts, max_new_tokens
        self.batch = engine.batch
        self.points = batch_ladder(samples, self.batch, points, label)
        self.trees = ladder_trees(width, self.points)
        self.queue = [ids for _, ids in prompts]
        # at T > 0 prompt p of the queue samples from seed + 1,000,000 + p: never a scored run's seed
        self.seeds = None if engine.sampling.greedy else [engine.sampling.seed + 1_000_000 + p
                                                           for p in range(len(self.queue))]
        # the order: None is plain decoding
        self.order = [run for i in range(len(self.trees) + 1) for run in
                      ([None] if i % PLAIN_EVERY == 0 or i == len(self.trees) else []) + self.trees[i:i + 1]]
        self.drift = DriftMeter(cost_model(samples).at_batch(self.batch), width)
        self.steps, self.cycles, self.seconds, self.reference, self.diverged = 0, 0, 0.0, None, []

    def step(self) -> None:
        """The order's next run on the train queue."""
        from simspec.measure.bench_batch import divergences

        tree = self.order[self.steps % len(self.order)]
        started = time.perf_counter()
        run = self.engine.decode(self.queue, tree, self.max_new_tokens, self.seeds)
        self.seconds += time.perf_counter() - started
        self.steps += 1
        self.drift.batch(run, plain=tree is None)
        if tree is None:
            self.reference = self.reference or run
            return
        self.cycles += run.cycles
        if self.engine.sampling.greedy and not all(
                d["near_tie"] for d in divergences(self.engine, self.prompts, run, self.reference)):
            self.diverged.append(tree.name)

    def result(self, co_timed: bool = False) -> InSitu:
        from simspec.measure.refit import refit_samples

        check_lossless(self.diverged, self.batch)
        samples, scales = refit_samples(self.samples, self.drift, self.batch)
        record = in_situ_record(self.prompts, self.max_new_tokens, self.points, self.drift, scales, self.seconds,
                                batch_size=self.batch, plain_runs=self.order.count(None), cycles=int(self.cycles),
                                **({"co_timed": True, "steps": self.steps} if co_timed else {}))
        return InSitu(samples, record)


def refit_batch(engine, profile: Profile, prompts: list[tuple[str, list[int]]], max_new_tokens: int,
                bar: Bar, points=LADDER) -> InSitu:
    """The ladder on train ``prompts`` as one queue through ``engine``'s B rows; the profile's curves at B refitted."""
    return fit_batch(engine, profile.samples, profile.meta.traces.width, prompts, max_new_tokens, bar, points,
                     f"profile {profile.directory}")


def fit_batch(engine, samples: list[dict], width: int, prompts: list[tuple[str, list[int]]], max_new_tokens: int,
              bar: Bar, points=LADDER, label: str = "the profile") -> InSitu:
    """``refit_batch`` on latency records: also calibrate's engine fit at each B > 1."""
    refit = BatchRefit(engine, samples, width, prompts, max_new_tokens, points, label)
    for tree in (None, refit.trees[len(refit.trees) // 2]):  # ``WARM_UP_TOKENS``: allocators grow before timing
        engine.decode(refit.queue[:refit.batch], tree, WARM_UP_TOKENS)
    tick = bar(f"in-situ runs at batch {refit.batch} (plain + static trees, interleaved)",
               len(prompts) * len(refit.order))
    for _ in refit.order:
        refit.step()
        tick(len(prompts))
    return refit.result()
