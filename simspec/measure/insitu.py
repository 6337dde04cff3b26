"""In-situ recalibration: a profile's latency curves refitted to the live engine's own cycles.

Inside the decoding loop, calibrate's tight-loop forwards run after other work and can cost
more, by a factor that differs between operations and tree sizes, which biases every predicted
ratio (docs/calibration.md#in-situ-recalibration). This runs plain decoding and a ladder of
static trees on train prompts, interleaved, holds every cycle against the profile's curves and
scales each curve by the live ratio: per size for verify and bookkeeping and per context for the
plain step, since the live ratio can step between neighbouring sizes
(``research/scripts/verify-by-size.py``); the arithmetic is ``simspec.measure.refit``'s."""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from simspec import __version__, flags
from simspec.errors import SimspecError
from simspec.measure import Bar
from simspec.sim.profile import Profile, load_live_profile

# (depth, verified size) of the static trees run: every size up to 12 (tree policies spend most
# cycles there, and neighbouring sizes differ live), then spread over the rest of the verify
# curve's range, each at a depth that can fill it at width 10.
LADDER = ((2, 2), (3, 3), (3, 4), (4, 5), (4, 6), (4, 7), (4, 8), (5, 9), (5, 10), (5, 11), (5, 12), (6, 16),
          (7, 24), (7, 32), (8, 48), (8, 64), (10, 128))
# The quick ladder: every V a small CPU tree uses most (2-12), then the larger trees of EAGLE's defaults.
QUICK_LADDER = ((2, 2), (3, 3), (3, 4), (4, 5), (4, 6), (4, 7), (4, 8), (5, 10), (5, 12), (6, 16), (7, 32), (8, 64))


def check_refit_flags(request) -> None:
    """``--recalibrate-prompts`` and ``--refit-ladder`` shape the refit ``--recalibrate`` makes (validate --real,
    load --live): refused without it, not ignored."""
    shaping = flags.given(request, ("recalibrate_prompts", "refit_ladder"))
    if shaping and not request.recalibrate:
        verb = "shapes" if len(shaping) == 1 else "shape"
        raise SimspecError(f"{', '.join(shaping)}: {verb} the refit that --recalibrate "
                           "makes: pass --recalibrate too")


def ladder_points(name: str, flag: str = "--refit-ladder") -> tuple[tuple[int, int], ...]:
    """``flag``'s (depth, V) points: full, quick, or trees of one's own as ``D:V,D:V``."""
    if name in ("full", "quick"):
        return LADDER if name == "full" else QUICK_LADDER
    try:
        points = tuple((int(d), int(v)) for d, v in (p.split(":") for p in name.split(",")))
    except ValueError:
        points = ()
    # a tree drafts at least one level (D >= 2) and verifies at least its root and one node per level
    if not points or any(not 2 <= d <= v for d, v in points):
        raise SimspecError(f"{flag} takes full, quick or depth:size pairs with 2 <= depth <= size, "
                           f"e.g. 3:4,4:8; not {name!r}")
    return points


@dataclass(frozen=True, kw_only=True)
class RecalibrateRequest:
    profile: str = flags.profile()
    n_prompts: int = flags.n_prompts(8)
    max_new_tokens: int = flags.max_new_tokens(48, min=4)
    out: str | None = flags.out()
    force: bool = flags.force()
    allow_other_device: bool = flags.allow_other_device()
    refit_ladder: str = flags.refit_ladder()

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

        ladder_points(self.refit_ladder)
        check_out(self.out_dir(), self.force)
        profile = load_live_profile(self.profile, "recalibration")
        prompts = profile.meta.traces.prompts
        chosen = load_prompts(prompts, split="train", n=self.n_prompts)
        if not chosen:
            raise SimspecError(f"no train prompts in {prompts}: recalibrate a profile whose traces have a train split")
        check_device(profile, self.allow_other_device, refit=True)  # before any model loads
        return profile, chosen


def check_device(profile: Profile, allow_other: bool, refit: bool) -> str | None:
    """Refuses a profile measured on another device model, saying what using it would do; with
    ``allow_other``, returns the warning to show instead (also for a profile that does not record
    its device)."""
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

    return [StaticPolicy(depth, width, size, f"static(D={depth},V={size})") for depth, size in points]


def operating_points(runs) -> list[tuple[int, int]]:
    """Each run's most frequent (tree depth, verified size), in order, without repeats."""
    points: list[tuple[int, int]] = []
    for run in runs:
        if run.cycles:
            point = Counter((int(c.depth), int(c.size)) for c in run.cycles).most_common(1)[0][0]
            if point not in points:
                points.append(point)
    return points


def refit_in_situ(engine, cost, samples: list[dict], width: int, prompts: list[tuple[str, list[int]]],
                  max_new_tokens: int, bar: Bar, ladder_points=LADDER) -> InSitu:
    """Greedy decoding and the static trees ``ladder_points`` on train ``prompts``, interleaved, and
    ``samples`` (priced by ``cost``) scaled to the live cycles."""
    from simspec.measure.interleave import DriftMeter, run_methods
    from simspec.measure.refit import bootstrap_spread, refit_samples

    engine.warm_up([len(ids) for _, ids in prompts], max_new_tokens, [v for _, v in ladder_points])
    started = time.perf_counter()
    ladder = ladder_trees(width, ladder_points)
    tick = bar("engine cycles (plain + static trees, interleaved)", len(prompts) * (len(ladder) + 1))
    drift = DriftMeter(cost, width)
    runs = run_methods(engine, prompts, ladder, max_new_tokens, tick, drift=drift)
    check_lossless([r.name for r in runs if r.divergences])
    refitted, scales = refit_samples(samples, drift)
    spread = bootstrap_spread(drift, samples, scales)
    seconds = time.perf_counter() - started
    return InSitu(refitted, in_situ_record(prompts, max_new_tokens, ladder_points, drift, scales, seconds,
                                           cycles=int(sum(sum(r.cycles) for r in runs)), **spread), tuple(drift.runs))


def check_lossless(diverged: list[str], batch: int = 1) -> None:
    """Refuses to refit on an engine whose trees diverged from greedy decoding (a lossless one never does)."""
    if diverged:
        at, flag = (f" at batch {batch}", f" --batch-size {batch}") if batch > 1 else ("", "")
        raise SimspecError(f"{', '.join(diverged)} diverged from greedy decoding during recalibration{at}: the engine "
                           f"is not lossless here; run `simspec bench-engine{flag}` and report it")


def in_situ_record(prompts: list, max_new_tokens: int, points, drift, scales: dict, seconds: float, **more) -> dict:
    """A refit's record (the profile's ``in_situ`` block, less ``base``)."""
    return {"created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "split": "train",
            "prompt_ids": [pid for pid, _ in prompts], "max_new_tokens": max_new_tokens,
            "trees": [list(t) for t in points], "scales": scales, "seconds": round(seconds, 1),
            "live_over_profile": {op: round(r, 4) for op, r in drift.ratios().items()}, **more}


class CoTimedRefit:
    """The in-situ refit spread over a validation's scored runs (after each scored prompt, plain
    decoding and ``trees(step)`` on the next train prompt), so that it is timed over the same
    minutes as the runs it predicts. Its ladder adds each scored run's most frequent (depth, V):
    the live curve can step between ladder sizes (``research/scripts/verify-by-method.py``); each
    step times every such point, as often as its method runs (one tree's time spreads from prompt
    to prompt), and the next ``trees_per_step`` of the ``ladder`` (``--refit-ladder``) in rotation."""

    def __init__(self, engine, base: Profile, prompts: list[tuple[str, list[int]]], max_new_tokens: int,
                 trees_per_step: int = 2, ladder=LADDER) -> None:
        from simspec.measure.interleave import DriftMeter

        self.engine, self.base, self.prompts, self.max_new_tokens = engine, base, prompts, max_new_tokens
        self.width, self.points, self.trees_per_step = base.meta.traces.width, list(ladder), trees_per_step
        self.rotated = len(ladder)  # the ladder's points come first; targeted ones follow
        self.drift = DriftMeter(base.cost, self.width)
        self.steps, self.cycles, self.seconds = 0, 0, 0.0

    def target(self, runs) -> None:
        """Adds to the ladder the operating points of ``runs`` (scored generations) it lacks."""
        self.points += [p for p in operating_points(runs) if p not in self.points]

    @property
    def ladder(self) -> list:
        return ladder_trees(self.width, self.points)

    def trees(self, step: int) -> list:
        """Step ``step``'s trees: every targeted operating point, then the next ``trees_per_step`` of the ladder."""
        ladder = self.ladder
        k, n = self.trees_per_step, self.rotated
        return ladder[n:] + [ladder[(step * k + j) % n] for j in range(k)]

    def step(self, runs=()) -> None:
        """One train prompt: plain decoding and this step's trees, after ``runs``' points join the ladder."""
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
        record = in_situ_record(self.prompts, self.max_new_tokens, self.points, self.drift, scales,
                                self.seconds, co_timed=True,
                                targeted=[list(t) for t in self.points[self.rotated:]],
                                trees_per_step=self.trees_per_step, steps=self.steps, cycles=self.cycles)
        return InSitu(samples, record, tuple(self.drift.runs))


def refitted_meta(profile: Profile, base_path: str, refit: InSitu, prompts: str, out_dir: Path, device: str) -> dict:
    """The refitted profile's metadata: the base's, this machine, the refit's record, the traces' path."""
    from simspec.machine import device_model, machine

    dropped = ("schema", "schema_version", "fit", "fit_error", "inputs_hash")
    return {**{k: v for k, v in profile.meta.to_json().items() if k not in dropped},
            "simspec_version": __version__, "created": refit.record["created"],
            "machine": machine(device), "device_model": device_model(device),
            "traces": {**profile.meta.traces.to_json(), "path": os.path.relpath(profile.traces_dir, out_dir.resolve())},
            "in_situ": {"base": {"name": profile.directory.name, "path": str(base_path),
                                 "inputs_hash": profile.meta.inputs_hash, "created": profile.meta.created},
                        "prompts": prompts, **refit.record}}


def recalibrate(request: RecalibrateRequest, bar: Bar, status: Callable[[str], object],
                checked: tuple[Profile, list] | None = None) -> dict:
    """Runs the ladder on the live engine and writes the refitted profile; returns the ``--json`` summary."""
    from simspec.cache import atomic_directory
    from simspec.measure.interleave import load_engine
    from simspec.sim.profile import write_profile

    profile, chosen = checked or request.check()
    warning = check_device(profile, request.allow_other_device, refit=True)
    points = ladder_points(request.refit_ladder)
    engine, ids = load_engine(profile, [p.text for p in chosen], request.max_new_tokens + max(d for d, _ in points),
                              status)
    refit = refit_in_situ(engine, profile.cost, profile.samples, profile.meta.traces.width,
                          [(p.id, i) for p, i in zip(chosen, ids)], request.max_new_tokens, bar, points)
    out_dir = request.out_dir()
    meta = refitted_meta(profile, request.profile, refit, profile.meta.traces.prompts, out_dir,
                         str(engine.target.device))
    with atomic_directory(out_dir, replace=request.force) as tmp:
        written = write_profile(tmp, meta, refit.samples)
    return {"profile": str(out_dir), "base": str(request.profile), "prompts": len(chosen),
            "cycles": refit.record["cycles"], "live_over_profile": refit.record["live_over_profile"],
            "inputs_hash": written.meta.inputs_hash, "seconds": refit.record["seconds"],
            "warnings": [warning] if warning else []}
