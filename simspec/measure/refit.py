"""A profile's latency records scaled by the live / profile ratios a ``DriftMeter`` measured (the
in-situ refit's arithmetic; numpy only): at B > 1 the records measured at B, and bookkeeping
(held at batch 1 only) written at B as B times batch 1's, so that batch 1's curves stay as
measured; the prefill, alone at every B, is scaled in place."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

# Plain steps' worth of pull towards the overall ratio on each grid context's scale: pins the
# contexts no step reached and steadies the barely reached ones, and is nothing against the
# thousands of steps a refit times.
CONTEXT_PRIOR_STEPS = 5.0
MIN_PLAIN_STEPS = 100  # fewer, and the plain step keeps one ratio: too few for a shape along the context
REPLICATES = 40  # resamples of a refit's prompts, kept in the profile as scale factors (validate's intervals)


def log_interp(sizes: np.ndarray, ratios: np.ndarray) -> Callable[[float], float]:
    """Live / profile ratio at any V: piecewise linear in log V through the ladder's, flat beyond them."""
    x, y = np.log(sizes.astype(float)), np.asarray(ratios, dtype=float)
    return lambda n: float(np.interp(np.log(max(float(n), 1.0)), x, y))


def context_ratios(grid, grid_seconds, contexts, measured, predicted, counts, overall: float) -> np.ndarray | None:
    """The plain-step curve's scale at each grid context that fits the live steps: the scaled curve is
    linear in the scales, so least squares on relative errors, weighted by steps, each scale pulled
    towards ``overall`` (per-point ratios would average a bump with its neighbours). None under
    ``MIN_PLAIN_STEPS`` steps."""
    grid, counts = np.asarray(grid, dtype=float), np.asarray(counts, dtype=float)
    if len(grid) < 2 or counts.sum() < MIN_PLAIN_STEPS:
        return None
    model = np.asarray(predicted, dtype=float) / counts  # the profile's step at each context
    hats = np.array([np.interp(contexts, grid, row) for row in np.eye(len(grid))]).T  # flat beyond the ends
    x = hats * np.asarray(grid_seconds, dtype=float)[None, :] / model[:, None]
    y = np.asarray(measured, dtype=float) / counts / model
    lhs = x.T @ (counts[:, None] * x) + CONTEXT_PRIOR_STEPS * np.eye(len(grid))
    rhs = x.T @ (counts * y) + CONTEXT_PRIOR_STEPS * overall
    return np.linalg.solve(lhs, rhs)


def plain_step_grid(samples: list[dict], batch: int = 1) -> np.ndarray:
    """The contexts the profile measured its plain step at, at ``batch``: where the refit scales it."""
    return np.array(sorted({r["context"] for r in samples if r["kind"] == "greedy" and r.get("batch", 1) == batch}))


def at_batch_records(samples: list[dict], batch: int) -> tuple[list[dict], list[dict]]:
    """(the records that price a cycle at ``batch``, the rest); at B > 1 batch 1's bookkeeping comes
    as B times its records, written at B; the prefill's records are in the first list at every B."""
    def at_b(r: dict) -> bool:
        return r.get("batch", 1) == batch or (batch > 1 and r["kind"] == "prefill")

    mine = [r for r in samples if at_b(r)]
    if batch > 1 and not any(r["kind"] == "bookkeeping" for r in mine):  # else held (refitted) at B already
        mine += [{**r, "batch": batch, "samples": [x * batch for x in r["samples"]],
                  **{k: r[k] * batch for k in ("median", "q25", "q75")}}
                 for r in samples if r["kind"] == "bookkeeping" and r.get("batch", 1) == 1]
    return mine, [r for r in samples if not at_b(r)]


def refit_samples(samples: list[dict], drift, batch: int = 1) -> tuple[list[dict], dict]:
    """The profile's latency records scaled by the live ratios ``drift`` measured at ``batch``, and each
    curve's scale: one number, or per verified size (verify, bookkeeping) or context (plain step).
    A ratio was measured against the profile's *model*, which differs from the raw samples where it
    is a fit (affine, for a noisy calibration); so such a curve's records become the model's value
    times the ratio, marked ``projected``, pricing each point at exactly what was measured."""
    from simspec.measure.interleave import OPERATION_CURVE, PER_SIZE

    mine, others = at_batch_records(samples, batch)
    overall = drift.ratios()
    scales: dict[str, object] = {}
    scale_at = {}  # curve -> ((n, context) -> scale)
    for op, curve in OPERATION_CURVE.items():
        sizes, ratios = drift.ratios_by_size(op) if op in PER_SIZE else (np.empty(0),) * 2
        if len(sizes):
            scale_at[curve] = lambda n, c, f=log_interp(sizes, ratios): f(n)
            scales[curve] = {int(v): round(float(r), 4) for v, r in zip(sizes, ratios)}
        else:
            ratio = overall.get(op, 1.0)
            scales[curve] = round(ratio, 4)
            scale_at[curve] = lambda n, c, r=ratio: r
    projected_kinds = {OPERATION_CURVE[op] for op in PER_SIZE if isinstance(scales.get(OPERATION_CURVE[op]), dict)}
    grid = plain_step_grid(mine, batch)
    by_context = context_ratios(grid, drift.cost.greedy(grid), *drift.greedy_steps_by_context(),
                                overall=overall.get("greedy step", 1.0)) if len(grid) else None
    if by_context is not None:
        scale_at["greedy"] = lambda n, c, g=grid.astype(float), r=by_context: float(np.interp(c, g, r))
        scales["greedy"] = {int(c): round(float(r), 4) for c, r in zip(grid, by_context)}
        projected_kinds.add("greedy")
    out = []
    for record in mine + _between_grid_points(mine, drift, batch):
        kind, scale = record["kind"], scale_at[record["kind"]](record["n"], record["context"])
        # A draft level of some of the batch's rows (``rows``) is priced by its own curve: never projected.
        projected = kind in projected_kinds and record.get("batch", 1) == batch and "rows" not in record
        # The model's value over the record's median: 1 where the model interpolates the samples.
        to_model = (float(drift.cost.curves[kind](record["n"], record["context"])) / record["median"] if projected
                    else 1.0)
        factor = scale * to_model
        out.append({**record, "samples": [x * factor for x in record["samples"]], "median": record["median"] * factor,
                    "q25": record["q25"] * factor, "q75": record["q75"] * factor, "in_situ_scale": scale,
                    **({"projected": True} if projected else {})})
    return out + others, scales


def _between_grid_points(mine: list[dict], drift, batch: int) -> list[dict]:
    """Records at the sizes the refit measured but the profile's grid lacks (the curve's value there),
    one per context, for each per-size curve: scaling only the grid's records would price such a
    size by its neighbours' ratios, and lose the step the refit measured there."""
    from simspec.measure.interleave import OPERATION_CURVE, PER_SIZE

    base = drift.cost
    added = []
    for op in PER_SIZE:
        kind = OPERATION_CURVE[op]
        own = [r for r in mine if r["kind"] == kind and r.get("batch", 1) == batch and "rows" not in r]
        if not own or kind not in base.curves:
            continue
        sizes, _ = drift.ratios_by_size(op)
        for context in sorted({r["context"] for r in own}):
            have = {r["n"] for r in own if r["context"] == context}
            low, high = min(have), max(have)
            for v in (int(v) for v in sizes if low < v < high and int(v) not in have):
                median = float(base.curves[kind](v, context))
                added.append({"kind": kind, "n": v, "context": context, "samples": [median], "median": median,
                              "q25": median, "q75": median, "interpolated": True,
                              **({"batch": batch} if batch != 1 else {})})
    return added


def _relative(scales: dict, point: dict) -> dict:
    """A replicate's scales over the point fit's, curve by curve (one factor, or one per key)."""
    out: dict[str, object] = {}
    for curve, base in point.items():
        mine = scales.get(curve, base)
        if isinstance(base, dict):
            keys = np.array(sorted(base), dtype=float)
            if isinstance(mine, dict):
                have = np.array(sorted(mine), dtype=float)
                values = np.interp(keys, have, [mine[k] for k in sorted(mine)])
            else:
                values = np.full(len(keys), float(mine))
            out[curve] = {str(int(k)): round(float(v / base[int(k)]), 4) for k, v in zip(keys, values)}
        else:
            ratio = float(np.mean(list(mine.values()))) if isinstance(mine, dict) else float(mine)
            out[curve] = round(ratio / float(base), 4)
    return out


def bootstrap_spread(drift, samples: list[dict], point: dict | None = None, draws: int = REPLICATES,
                     seed: int = 0) -> dict:
    """The refit again on its prompts resampled with replacement, ``draws`` times: every replicate's
    scales over the whole refit's (``point``; computed when not given) and each curve's spread (the
    median over its keys of the factors' standard deviation). Whole prompts are resampled, so the
    per-size ratios move together as the prompts make them: what ``validate`` replays."""
    from simspec.measure.interleave import DriftMeter

    runs = drift.runs
    slots = sorted({r.slot for r in runs})
    if len(slots) < 2:
        return {"spread": {}, "replicates": [], "resampled": {"prompts": len(slots), "draws": 0}}
    by_slot = {s: [r for r in runs if r.slot == s] for s in slots}
    point = point if point is not None else refit_samples(samples, drift)[1]
    rng = np.random.default_rng(seed)
    replicates = []
    for _ in range(draws):
        meter = DriftMeter(drift.cost, drift.width)
        for i in rng.integers(0, len(slots), size=len(slots)):
            for run in by_slot[slots[i]]:
                meter.add_timing(run)
        replicates.append(_relative(refit_samples(samples, meter)[1], point))
    spread = {}
    for curve, base in point.items():
        if isinstance(base, dict):
            per_key = np.array([[r[curve][str(k)] for k in sorted(base)] for r in replicates])
            spread[curve] = round(float(np.median(per_key.std(axis=0))), 4)
        else:
            spread[curve] = round(float(np.std([r[curve] for r in replicates])), 4)
    return {"spread": spread, "replicates": replicates, "resampled": {"prompts": len(slots), "draws": draws}}


def replicate_samples(samples: list[dict], factors: dict) -> list[dict]:
    """``samples`` with each batch-1 record's median times its curve's factor in a replicate (interpolated)."""
    out = []
    for record in samples:
        factor = factors.get(record["kind"], 1.0)
        if record.get("batch", 1) != 1 and record["kind"] != "prefill":
            factor = 1.0  # the fit scaled batch 1's curves only
        elif isinstance(factor, dict):
            keys = np.array([float(k) for k in factor])
            order = np.argsort(keys)
            at = record["context"] if record["kind"] == "greedy" else record["n"]
            x = (np.log(keys[order]), np.log(max(float(at), 1.0))) if record["kind"] != "greedy" else (keys[order], at)
            factor = float(np.interp(x[1], x[0], np.array(list(factor.values()), dtype=float)[order]))
        out.append({**record, "median": record["median"] * factor})
    return out
