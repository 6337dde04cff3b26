"""Calibrate's engine fit: the tight-loop curves scaled to what whole engine cycles cost.

Calibrate's curves time each operation alone, in a tight loop. The decoding loop runs the same
forwards after other work (the drafter's forwards, the host building and trimming the tree), and
on a CPU they cost another amount, by a factor that differs between operations and between tree
sizes; the host's bookkeeping, timed without the models, costs many times more inside the engine
(caches are cold after a model forward). A profile priced by the tight loops alone mispredicts
every speedup by 10-25 % (docs/calibration.md#the-engine-fit). So ``calibrate`` ends its
measurement by running the engine itself: plain decoding and a ladder of static trees on train
prompts (never held-out ones), interleaved, each cycle held against the tight-loop curves
(``DriftMeter``), and writes the curves scaled to those cycles (``simspec.measure.refit``): the
profile predicts the engine with no separate refit.

The fit also measures its own spread: its prompts are resampled (bootstrap) and each
operation's live / tight-loop ratio taken again. The profile carries each operation's relative
spread and a set of replicate scale factors; ``validate --real`` replays every method under each
replicate, which gives every predicted speedup an interval.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Bar = Callable[[str, int], Callable[..., None]]

# The quick grid's ladder: every V a small CPU tree uses most (2-12), then the larger trees of
# EAGLE's defaults; the full grid runs ``insitu.LADDER``.
QUICK_LADDER = ((2, 2), (3, 3), (3, 4), (4, 5), (4, 6), (4, 7), (4, 8), (5, 10), (5, 12), (6, 16), (7, 32),
                (8, 64))


@dataclass(frozen=True)
class EngineFitSpec:
    """How much engine to run: train prompts, new tokens per run, the static trees' (D, V)."""

    prompts: int
    tokens: int
    ladder: tuple[tuple[int, int], ...]

    @classmethod
    def of(cls, request) -> EngineFitSpec:
        """A ``CalibrateRequest``'s: its grid's defaults, less what ``--engine-prompts`` and
        ``--engine-tokens`` set."""
        from simspec.measure.insitu import LADDER

        default = cls(3, 32, QUICK_LADDER) if request.quick else cls(8, 48, LADDER)
        prompts = default.prompts if request.engine_prompts is None else request.engine_prompts
        return cls(prompts, request.engine_tokens or default.tokens, default.ladder)


@dataclass(frozen=True)
class EngineFit:
    """The profile's samples scaled to the engine's cycles, the record of the fit, and the
    tight-loop curves' held-out error (the profile's ``fit_error``: the scaling keeps their shapes)."""

    samples: list[dict]
    record: dict  # the profile's ``engine_fit``
    tight_fit_error: dict


def fit_set(request, source) -> str:
    """The prompt set whose train split the fit runs on: the reused traces', else ``--prompts``."""
    return (source[1].get("prompts") or request.prompts) if source else request.prompts


def fit_to_engine(engine, samples: list[dict], width: int, dataset: str, prompts: list[tuple[str, list[int]]],
                  spec: EngineFitSpec, bar: Bar) -> EngineFit:
    """Runs plain decoding and ``spec.ladder``'s static trees on ``prompts`` (train prompts),
    interleaved, and scales ``samples`` (the tight-loop curves) to the live cycles."""
    from simspec.measure.insitu import refit_in_situ
    from simspec.sim.profile import cost_model

    tight = cost_model(samples)
    refit = refit_in_situ(engine, tight, samples, width, prompts, spec.tokens, bar, spec.ladder)
    record = {"prompts": dataset, **{k: v for k, v in refit.record.items() if k != "live_over_profile"}}
    record["live_over_tight_loop"] = refit.record["live_over_profile"]
    # The written profile interpolates the scaled points; the tight-loop fits' held-out errors,
    # per curve, say how well the curves' shapes were measured.
    record["tight_loop_fit"] = {kind: {"method": rep["method"], "held_out": rep["held_out"],
                                       "median": rep[rep["method"]]["median"], "p90": rep[rep["method"]]["p90"]}
                                for kind, rep in tight.report.items() if rep["method"] in rep}
    return EngineFit(refit.samples, record, tight.fit_error())


def fit_prompts(request, kind: str, source) -> list:
    """The train prompts of ``request``'s (a ``CalibrateRequest``) engine fit: of its traces'
    prompt set, else of ``--prompts``; none for an analytic profile, traces alone, or
    ``--engine-prompts 0``."""
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
    """Calibrate's engine fit on the loaded pair: ``samples`` scaled to the live engine's cycles
    on ``chosen`` train prompts (of ``fit_set``), at the request's temperature and runtime."""
    from simspec.data import render_chat
    from simspec.engine.speculative import SpeculativeEngine

    spec = EngineFitSpec.of(request)
    engine = SpeculativeEngine(loaded, drafter, request.sampling(), runtime=request.runtime)
    ids = [render_chat(loaded.tokenizer, p.text) for p in chosen]
    for one in ids:
        engine.check_length(one, spec.tokens + max(d for d, _ in spec.ladder))
    return fit_to_engine(engine, samples, width, fit_set(request, source), [(p.id, i) for p, i in zip(chosen, ids)],
                         spec, bar)
