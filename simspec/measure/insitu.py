"""In-situ recalibration: a measured profile's latency curves refitted to the live engine's own
cycle timings.

``calibrate`` times each operation alone, in a tight loop. Inside the decoding loop the same
forward passes run right after other work (the drafter's forwards, the host building the tree),
and can cost more, by a factor that differs between operations and between tree sizes
(measured: docs/calibration.md#in-situ-recalibration). Speedups are ratios, so a shift shared
by every operation cancels; a shift that differs between operations (or between tree sizes)
biases every prediction.

This runs plain greedy decoding and a ladder of static trees on the profile's *train* prompts
(never the held-out ones a validation scores), interleaved, holds every cycle against the
profile's curves (``DriftMeter``), and scales each curve's points by the live ratio: for verify
and bookkeeping the ratio measured at each ladder size, interpolated in log V (``log_interp``;
the ladder holds every V up to 12, where tree policies spend most cycles); for the greedy step
the ratio at each of its curve's grid contexts (``context_ratios``); one ratio for drafting and
the prefill. Per size, because the live curve's shape along V need not be calibrate's: its
live / profile ratio can step between neighbouring sizes, repeatably from pass to pass
(``scripts/results/verify-by-size.py``), which one line through sparse sizes would misprice.
Per context for the greedy step, for the same reason along L. The arithmetic is
``simspec.measure.refit``'s; the refit at a batch size above 1, ``simspec.measure.insitu_batch``'s.
``validate --real --recalibrate`` runs the same refit (``refit_in_situ``) inside a validation,
on train prompts of the scored set, right before the runs it predicts.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from simspec import __version__, flags
from simspec.errors import SimspecError
from simspec.sim.profile import Profile, load_live_profile

Bar = Callable[[str, int], Callable[..., None]]

# (depth, verified size) of the static trees run: every size up to 12 (tree policies spend most
# cycles there, and neighbouring sizes differ live), then spread over the rest of the verify
# curve's range, each at a depth that can fill it at width 10.
LADDER = ((2, 2), (3, 3), (3, 4), (4, 5), (4, 6), (4, 7), (4, 8), (5, 9), (5, 10), (5, 11), (5, 12), (6, 16),
          (7, 24), (7, 32), (8, 48), (8, 64), (10, 128))


@dataclass(frozen=True, kw_only=True)
class RecalibrateRequest:
    profile: str = flags.profile()
    n_prompts: int = flags.n_prompts(8)
    max_new_tokens: int = flags.max_new_tokens(48, min=4)
    out: str | None = flags.out()
    force: bool = flags.force()
    allow_other_device: bool = flags.allow_other_device()

    def out_dir(self) -> Path:
        if self.out:
            return Path(self.out)
        base = Path(self.profile)
        base = base.parent if base.name == "profile.json" else base
        return base.parent / f"{base.name}-insitu"

    def check(self) -> tuple[Profile, list]:
        """Flags, output folder, profile and prompts, before any model loads."""
        from simspec.cache import check_out
        from simspec.data import load_prompts

        check_out(self.out_dir(), self.force)
        profile = load_live_profile(self.profile, "recalibration")
        prompts = profile.meta.traces.prompts
        chosen = load_prompts(prompts, split="train", n=self.n_prompts)
        if not chosen:
            raise SimspecError(f"no train prompts in {prompts}: recalibrate a profile whose traces have a train split")
        check_device(profile, self.allow_other_device, refit=True)  # before any model loads
        return profile, chosen


def check_device(profile: Profile, allow_other: bool, refit: bool) -> str | None:
    """Refuses a profile measured on another device model, saying what using it would do (to a
    refit of it, or to predictions from it); with ``allow_other``, returns the warning to show
    instead. A profile that predates the ``device_model`` field cannot be checked: a warning too."""
    from simspec.machine import device_model

    device = "cpu" if profile.meta.device.startswith("cpu") else "cuda"
    if device == "cuda":
        import torch  # noqa: F401  (device_model reads the GPU's name through torch)
    here, there = device_model(device), profile.meta.device_model
    if there is None:
        return (f"profile {profile.directory} does not record the device it was measured on; it may describe "
                f"another machine than this {here}")
    if there == here:
        return None
    if device == "cpu" and " (family " not in there and here.startswith(f"{there} (family "):
        # Profiles from before the family/model numbers name the brand only: cannot tell generations apart.
        return (f"profile {profile.directory} records only the CPU name {there!r}, and this is {here}: if it was "
                "measured on another generation, predictions may be off")
    if not allow_other:
        consequence = "a refit would start from its curve shapes" if refit else "its predictions would be off here"
        raise SimspecError(f"profile {profile.directory} was measured on {there}, and this is {here}: its latencies "
                           f"describe that machine, so {consequence}. Calibrate this one "
                           "(`simspec calibrate --gpu cpu --traces-from PROFILE`), or pass --allow-other-device")
    return f"profile {profile.directory} was measured on {there}, not on this {here}: predictions may be off"


@dataclass(frozen=True)
class InSitu:
    """A profile's samples refitted to the live engine, and what the refit measured."""

    samples: list[dict]
    record: dict  # the profile's ``in_situ`` block, less ``base``
    timings: tuple = ()  # the refit's runs as RunTiming, cycle by cycle (the residual table)


def ladder_trees(width: int, points=LADDER) -> list:
    """``points`` (default ``LADDER``), each (depth, V), as static-tree policies at the traces' width."""
    from simspec.policies.base import StaticPolicy

    trees = []
    for depth, size in points:
        tree = StaticPolicy(depth, width, size)
        tree.name = f"static(D={depth},V={size})"
        trees.append(tree)
    return trees


def operating_points(runs) -> list[tuple[int, int]]:
    """Each run's most frequent (tree depth, verified size), in order, without repeats."""
    from collections import Counter

    points: list[tuple[int, int]] = []
    for run in runs:
        if run.cycles:
            point = Counter((int(c.depth), int(c.size)) for c in run.cycles).most_common(1)[0][0]
            if point not in points:
                points.append(point)
    return points


def refit_in_situ(engine, cost, samples: list[dict], width: int, prompts: list[tuple[str, list[int]]],
                  max_new_tokens: int, bar: Bar, ladder_points=LADDER) -> InSitu:
    """Runs greedy decoding and the ladder of static trees (``ladder_points``, each (D, V), at
    ``width``) on ``prompts`` (train prompts, never the ones a validation scores), interleaved,
    and scales ``samples`` (priced by ``cost``, their cost model) to the live cycles."""
    from simspec.measure.interleave import run_real
    from simspec.measure.refit import bootstrap_spread, refit_samples

    engine.warm_up([len(ids) for _, ids in prompts], max_new_tokens, [v for _, v in ladder_points])
    started = time.perf_counter()
    ladder = ladder_trees(width, ladder_points)
    tick = bar("engine cycles (plain + static trees, interleaved)", len(prompts) * (len(ladder) + 1))
    runs, drift = run_real(engine, prompts, ladder, max_new_tokens, cost, tick)
    diverged = [r.name for r in runs if r.divergences]
    if diverged:  # a lossless engine never gets here; refuse to build on one that is not
        raise SimspecError(f"{', '.join(diverged)} diverged from greedy decoding during recalibration: the engine "
                           "is not lossless here; run `simspec bench-engine` and report it")
    refitted, scales = refit_samples(samples, drift)
    return InSitu(refitted, {
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "split": "train",
        "prompt_ids": [pid for pid, _ in prompts], "max_new_tokens": max_new_tokens,
        "trees": [list(t) for t in ladder_points], "cycles": int(sum(sum(r.cycles) for r in runs)),
        "live_over_profile": {op: round(r, 4) for op, r in drift.ratios().items()},
        "scales": scales, **bootstrap_spread(drift, samples, scales),
        "seconds": round(time.perf_counter() - started, 1),
    }, tuple(drift.runs))


class CoTimedRefit:
    """The in-situ refit spread over a validation's scored runs: after each scored prompt, plain
    decoding and ``trees(step)`` (below) on the next train prompt, timed
    against the base profile. A refit run before the scored runs is minutes older than they are,
    and a shared machine drifts in those minutes; this one's latencies are measured over the
    same minutes as the runs it predicts, from train prompts only.

    Its ladder is ``LADDER`` plus the scored methods' own operating points: each scored run's most
    frequent (depth, V), taken from the runs ``step`` is shown (their shapes only, never their
    times). A method's V off the ladder is otherwise priced between two ladder sizes, and the
    live curve can step between them (``scripts/results/verify-by-method.py``).

    Every step times each of those operating points once and the next ``trees_per_step`` trees of
    ``LADDER`` in rotation: a point a method spends its cycles at is then measured on as many
    prompts as the method itself; rotated with the rest, it would be timed on a fraction of them,
    and one tree's time spreads from prompt to prompt (measured:
    docs/results/validation.md#measured-humaneval-six-passes-the-same-code)."""

    def __init__(self, engine, base: Profile, prompts: list[tuple[str, list[int]]], max_new_tokens: int,
                 trees_per_step: int = 2) -> None:
        from simspec.measure.interleave import DriftMeter

        self.engine, self.base, self.prompts, self.max_new_tokens = engine, base, prompts, max_new_tokens
        self.width, self.points, self.trees_per_step = base.meta.traces.width, list(LADDER), trees_per_step
        self.drift = DriftMeter(base.cost, self.width)
        self.steps, self.cycles, self.seconds = 0, 0, 0.0

    def target(self, runs) -> None:
        """Adds to the ladder the operating points of ``runs`` (scored generations) it lacks."""
        self.points += [p for p in operating_points(runs) if p not in self.points]

    @property
    def ladder(self) -> list:
        return ladder_trees(self.width, self.points)

    def trees(self, step: int) -> list:
        """The trees of step ``step``: every targeted operating point, then the next
        ``trees_per_step`` of ``LADDER`` in rotation."""
        ladder = self.ladder
        k, n = self.trees_per_step, len(LADDER)
        return ladder[n:] + [ladder[(step * k + j) % n] for j in range(k)]

    def step(self, runs=()) -> None:
        """One train prompt: plain decoding and this step's trees, in rotated order; first, the
        operating points of the scored ``runs`` just timed join the ladder."""
        import numpy as np

        self.target(runs)
        started = time.perf_counter()
        _, ids = self.prompts[self.steps % len(self.prompts)]
        trees = self.trees(self.steps)
        seed = self.engine.sampling.seed + 1_000_000 + self.steps  # never a scored run's seed
        self.drift.slot = self.steps
        for slot in np.roll(np.arange(len(trees) + 1), -self.steps):  # slot 0: plain decoding
            if slot == 0:
                self.drift.greedy(self.engine.plain(ids, self.max_new_tokens, seed))
            else:
                run = self.engine.generate(ids, trees[slot - 1], self.max_new_tokens, seed)
                self.drift.speculative(run, trees[slot - 1].name)
                self.cycles += len(run.cycles)
        self.steps += 1
        self.seconds += time.perf_counter() - started

    def result(self) -> InSitu:
        from simspec.measure.refit import refit_samples

        samples, scales = refit_samples(self.base.samples, self.drift)
        return InSitu(samples, {
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "split": "train", "co_timed": True,
            "prompt_ids": [pid for pid, _ in self.prompts], "max_new_tokens": self.max_new_tokens,
            "trees": [list(t) for t in self.points], "targeted": [list(t) for t in self.points[len(LADDER):]],
            "trees_per_step": self.trees_per_step, "steps": self.steps,
            "cycles": self.cycles, "live_over_profile": {op: round(r, 4) for op, r in self.drift.ratios().items()},
            "scales": scales, "seconds": round(self.seconds, 1),
        }, tuple(self.drift.runs))


def refitted_meta(profile: Profile, base_path: str, refit: InSitu, prompts: str, out_dir: Path, device: str) -> dict:
    """The refitted profile's metadata: the base profile's, this machine, the in-situ record and
    the traces' path as seen from ``out_dir``."""
    from simspec.machine import device_model, machine

    meta = {k: v for k, v in profile.meta.to_json().items() if k not in ("schema", "schema_version", "fit", "fit_error",
                                                              "inputs_hash")}
    meta.update({
        "simspec_version": __version__, "created": refit.record["created"],
        "machine": machine(device), "device_model": device_model(device),
        "traces": {**profile.meta.traces.to_json(), "path": os.path.relpath(profile.traces_dir, out_dir.resolve())},
        "in_situ": {"base": {"name": profile.directory.name, "path": str(base_path),
                             "inputs_hash": profile.meta.inputs_hash, "created": profile.meta.created},
                    "prompts": prompts, **refit.record},
    })
    return meta


def recalibrate(request: RecalibrateRequest, bar: Bar, status: Callable[[str], object],
                checked: tuple[Profile, list] | None = None) -> dict:
    """Runs the ladder on the live engine and writes the refitted profile; returns the summary
    (the ``--json`` line)."""
    from simspec.cache import atomic_directory
    from simspec.measure.interleave import load_engine
    from simspec.sim.profile import write_profile

    profile, chosen = checked or request.check()
    warning = check_device(profile, request.allow_other_device, refit=True)
    engine, ids = load_engine(profile, [p.text for p in chosen], request.max_new_tokens + max(d for d, _ in LADDER),
                              status)
    refit = refit_in_situ(engine, profile.cost, profile.samples, profile.meta.traces.width,
                          [(p.id, i) for p, i in zip(chosen, ids)], request.max_new_tokens, bar)
    out_dir = request.out_dir()
    meta = refitted_meta(profile, request.profile, refit, profile.meta.traces.prompts, out_dir,
                         str(engine.target.device))
    with atomic_directory(out_dir, replace=request.force) as tmp:
        written = write_profile(tmp, meta, refit.samples)
    return {"profile": str(out_dir), "base": str(request.profile), "prompts": len(chosen),
            "cycles": refit.record["cycles"], "live_over_profile": refit.record["live_over_profile"],
            "inputs_hash": written.meta.inputs_hash, "seconds": refit.record["seconds"],
            "warnings": [warning] if warning else []}
