"""Calibrate's engine fit: the tight-loop curves scaled to what whole engine cycles cost. Inside
the loop the forwards run after other work and cost another amount (the host's bookkeeping many
times more: caches are cold), so tight loops alone mispredict every speedup by 10-25 %
(docs/calibration.md#the-engine-fit). ``calibrate`` ends by running plain decoding and a ladder
of static trees on train prompts and scaling the curves to those cycles, with bootstrap
replicates of the scales, under which ``validate --real`` gives every prediction an interval."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simspec.measure import Bar

QUICK_PROMPTS = 3  # --quick's train prompts (the demo's calibration); else 8


@dataclass(frozen=True)
class EngineFitSpec:
    """How much engine to run: train prompts, new tokens per run, the static trees' (D, V)."""

    prompts: int
    tokens: int
    ladder: tuple[tuple[int, int], ...]

    @classmethod
    def of(cls, request) -> EngineFitSpec:
        """A ``CalibrateRequest``'s: its grid's defaults, less ``--engine-prompts``, ``-tokens`` and ``-ladder``."""
        from simspec.measure.insitu import ladder_points

        quick = request.quick
        prompts = (QUICK_PROMPTS if quick else 8) if request.engine_prompts is None else request.engine_prompts
        ladder = ladder_points(request.engine_ladder or ("quick" if quick else "full"), "--engine-ladder")
        return cls(prompts, request.engine_tokens or (32 if quick else 48), ladder)


@dataclass(frozen=True)
class EngineFit:
    """The scaled samples, the fit's record, and the tight-loop curves' held-out error (their shapes')."""

    samples: list[dict]
    record: dict  # the profile's ``engine_fit``
    tight_fit_error: dict


def fit_set(request, source) -> str:
    """The prompt set whose train split the fit runs on: the reused traces', else ``--prompts``."""
    return (source[1].get("prompts") or request.prompts) if source else request.prompts


def fit_prompts(request, kind: str, source) -> list:
    """The engine fit's train prompts; none for an analytic profile, traces alone, or ``--engine-prompts 0``."""
    from simspec.data import DataError, load_prompts
    from simspec.errors import SimspecError

    if kind != "measured" or request.traces_only or request.engine_prompts == 0:
        return []
    prompts, spec = fit_set(request, source), EngineFitSpec.of(request)
    try:
        return load_prompts(prompts, split="train", n=spec.prompts)
    except DataError:
        raise SimspecError(f"the engine fit runs on train prompts of {prompts}, and it has none: pass --prompts "
                           "a set with a train split, or --engine-prompts 0 (the tight-loop curves, which "
                           "mispredict the engine)") from None


def fit_engine(loaded, drafter, request, source, samples: list[dict], width: int, chosen: list, bar: Bar
               ) -> EngineFit:
    """Calibrate's engine fit on the loaded pair: plain decoding and the ladder on ``chosen`` train
    prompts, interleaved, and ``samples`` (the tight-loop curves) scaled to the live cycles."""
    from simspec.data import render_chat
    from simspec.engine.speculative import SpeculativeEngine
    from simspec.measure.insitu import refit_in_situ
    from simspec.sim.profile import cost_model

    spec = EngineFitSpec.of(request)
    engine = SpeculativeEngine(loaded, drafter, request.sampling(), runtime=request.runtime)
    ids = [render_chat(loaded.tokenizer, p.text) for p in chosen]
    for one in ids:
        engine.check_length(one, spec.tokens + max(d for d, _ in spec.ladder))
    tight = cost_model(samples)
    prompts = [(p.id, i) for p, i in zip(chosen, ids)]
    sizes = sorted({v for _, v in spec.ladder})
    context, size = int(np.mean([len(one) for one in ids])) + spec.tokens // 2, sizes[len(sizes) // 2]
    before = tight_loop_seconds(engine, context, size)
    refit = refit_in_situ(engine, tight, samples, width, prompts, spec.tokens, bar, spec.ladder)
    record = {"prompts": fit_set(request, source), **refit.record}
    record["live_over_tight_loop"] = record.pop("live_over_profile")
    record["tight_loop_pace"] = tight_loop_pace(tight, context, size, before, tight_loop_seconds(engine, context, size))
    fitted, batches = _fit_batches(loaded, drafter, request, refit.samples, width, prompts, spec, bar)
    if batches:
        record["batches"] = batches
    # The written profile interpolates the scaled points; the tight-loop fits' held-out errors,
    # per curve, say how well the curves' shapes were measured.
    record["tight_loop_fit"] = {kind: {"method": rep["method"], "held_out": rep["held_out"],
                                       "median": rep[rep["method"]]["median"], "p90": rep[rep["method"]]["p90"]}
                                for kind, rep in tight.report.items() if rep["method"] in rep}
    return EngineFit(fitted, record, tight.fit_error())


def tight_loop_seconds(engine, context: int, size: int, repeats: int = 5) -> np.ndarray:
    """The tight loop's plain step and verify of ``size`` tokens after ``context``, timed now: medians (s)."""
    from simspec.measure.curves import greedy_latency
    from simspec.measure.profiler import target_latency

    plain = greedy_latency(engine.target, [context], repeats, lambda n=1: None, engine.sampling, engine.runtime)
    (verify,) = target_latency(engine.target, [size], [context], repeats, runtime=engine.runtime)
    return np.array([plain[0]["median"], float(np.median(verify.samples))])


def tight_loop_pace(tight, context: int, size: int, *readings: np.ndarray) -> dict:
    """``tight_loop_seconds`` readings over the curves' prices, their geometric mean: how far the
    machine's pace moved between the curves and the fit, read just before and just after its live
    cycles (one reading alone once put verify at 0.60 where the held-out runs paid 1.0, on a loaded
    machine). The scales carry that move (the profile prices the engine as the fit found it);
    divided by it, a scale is the engine's own cost over the tight loop's. Only the ladder's middle
    size: each costs seconds."""
    prices = np.array([float(tight.greedy(context)), float(tight.verify(size, context))])
    ratio = np.exp(np.log(np.array(readings)).mean(axis=0)) / prices
    return {"greedy step": round(float(ratio[0]), 4), "verify": {str(size): round(float(ratio[1]), 4)}}


def _fit_batches(loaded, drafter, request, samples: list[dict], width: int, prompts: list, spec: EngineFitSpec,
                 bar: Bar) -> tuple[list[dict], dict]:
    """The fit at each B > 1 of ``--batch-sizes``: the train prompts as one queue through B rows,
    plain decoding and the ladder's trees the verify curve at B reaches, and the curves at B scaled
    to those batched cycles, as ``--recalibrate`` at B refits them: a tight loop at B times the
    forward alone, where the engine's step also picks each row's token and logs the cycle
    (docs/calibration.md#the-engine-fit)."""
    from simspec.engine.speculative import SpeculativeEngine
    from simspec.measure.insitu_batch import fit_batch

    batches = {}
    for batch in (b for b in request.batch_sizes if b > 1):
        rows = SpeculativeEngine(loaded, drafter, request.sampling(), runtime=request.runtime, batch_size=batch)
        fit = fit_batch(rows, samples, width, prompts, spec.tokens, bar, spec.ladder, "the measured curves")
        samples = fit.samples
        batches[str(batch)] = {"live_over_tight_loop": fit.record["live_over_profile"], "scales": fit.record["scales"],
                               "trees": fit.record["trees"], "cycles": fit.record["cycles"],
                               "seconds": fit.record["seconds"]}
    return samples, batches
