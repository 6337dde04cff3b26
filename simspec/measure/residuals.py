"""Where the cost model misses: every live run's time, component by component, held against the
model's prediction for the same cycles.

A method's simulated speedup is (greedy time predicted / method time predicted); its error is
the sum of what each component of the two times mispredicts. This splits it: for each method,
the mispredicted seconds of each component as a share of the method's live time (negative:
the model predicts less than the engine spends), the time the components do not cover at all
(``other``: resets, Python between cycles; the model has no term for it), and the same for
plain greedy decoding. Beside it, the live / predicted ratio of the main curves along the
operating point they depend on (verified size, context, tokens committed to the drafter), so a
missing dependency shows up as a ratio that drifts along a bin axis rather than a constant.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from simspec.measure.interleave import RunTiming

COMPONENTS = ("greedy step", "draft", "verify", "policy", "bookkeeping", "prefill", "other")
# Bin edges (upper bounds, inclusive) along each operating-point axis.
BINS = {
    "size": (1, 4, 8, 16, 64, 10_000),
    "context": (128, 256, 512, 100_000),
    "committed": (1, 2, 3, 100),
}


def _method_breakdown(timings: Sequence[RunTiming], charge: float) -> dict:
    measured, predicted = defaultdict(float), defaultdict(float)
    total = 0.0
    for run in timings:
        total += run.total_s
        for op, values in run.measured.items():
            measured[op] += float(np.sum(values))
        for op, values in run.predicted.items():
            predicted[op] += float(np.sum(values))
        if "policy" in run.measured:
            predicted["policy"] += charge * len(run.measured["policy"])
        measured["prefill"] += run.prefill_s
        predicted["prefill"] += run.prefill_predicted_s
    covered = sum(measured.values())
    measured["other"], predicted["other"] = total - covered, 0.0
    shares = {op: (predicted[op] - measured[op]) / total for op in measured}
    return {"seconds": total, "time_error": (sum(predicted.values()) - total) / total,
            "mispredicted_share": shares,
            "live_over_predicted": {op: measured[op] / predicted[op] for op in measured if predicted[op] > 0}}


def _binned(timings: Sequence[RunTiming], op: str, axis: str) -> list[dict]:
    """live / predicted for ``op`` summed within bins of ``axis`` (speculative runs only)."""
    rows = [(run.cycles[axis], run.measured[op], run.predicted[op]) for run in timings
            if axis in run.cycles and op in run.predicted]
    if not rows:
        return []
    x, m, p = (np.concatenate(parts) for parts in zip(*rows))
    keep = p > 0
    x, m, p = x[keep], m[keep], p[keep]
    out, low = [], 0
    for high in BINS[axis]:
        inside = (x > low) & (x <= high)
        if inside.any():
            out.append({"bin": f"{low + 1}-{high}" if high < 10_000 else f">{low}", "cycles": int(inside.sum()),
                        "live_over_predicted": float(m[inside].sum() / p[inside].sum())})
        low = high
    return out


def residual_breakdown(timings: Sequence[RunTiming], charge: dict[str, float]) -> dict:
    """``timings``: the DriftMeter's runs; ``charge``: method -> decision seconds per cycle the
    simulator charged. Returns the per-method breakdown and the binned curve ratios."""
    by_method: dict[str, list[RunTiming]] = defaultdict(list)
    for run in timings:
        by_method[run.method].append(run)
    speculative = [run for run in timings if run.method != "greedy"]
    return {
        "components": list(COMPONENTS),
        "methods": {name: _method_breakdown(runs, charge.get(name, 0.0)) for name, runs in by_method.items()},
        "curves": {
            "verify by verified size": _binned(speculative, "verify", "size"),
            "verify by context": _binned(speculative, "verify", "context"),
            "draft by tokens committed": _binned(speculative, "draft", "committed"),
            "bookkeeping by verified size": _binned(speculative, "bookkeeping", "size"),
        },
    }
