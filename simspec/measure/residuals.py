"""Where the cost model misses: every live run's time, component by component, against the model's
prediction for the same cycles. Per method, each component's mispredicted seconds as a share of
the live time, the time no component covers (``other``: resets, Python between cycles), and the
curves' live / predicted ratio along the operating point, where a missing dependency shows as a
ratio that drifts along a bin axis."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from simspec.measure.interleave import RunTiming
from simspec.sim.charge import DecisionCharge, as_charge

COMPONENTS = ("greedy step", "draft", "verify", "policy", "bookkeeping", "prefill", "other")
# Bin edges (upper bounds, inclusive) along each operating-point axis.
# Every size up to 16 on its own: the live verify curve has its own shape there (V = 7 can cost
# more than V = 8), which wider bins average away.
BINS = {
    "size": (*range(1, 17), 32, 64, 128, 10_000),
    "depth": (*range(1, 9), 100),
    "context": (128, 256, 512, 100_000),
    "committed": (1, 2, 3, 100),
}


def _method_breakdown(timings: Sequence[RunTiming], charge: DecisionCharge) -> dict:
    measured, predicted = defaultdict(float), defaultdict(float)
    total = 0.0
    for run in timings:
        total += run.total_s
        for op, values in run.measured.items():
            measured[op] += float(np.sum(values))
        for op, values in run.predicted.items():
            predicted[op] += float(np.sum(values))
        if "policy" in run.measured:
            predicted["policy"] += float(charge(run.cycles["depth"]).sum())
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
            label = str(high) if high == low + 1 else f"{low + 1}-{high}" if high < 10_000 else f">{low}"
            out.append({"bin": label, "cycles": int(inside.sum()),
                        "live_over_predicted": float(m[inside].sum() / p[inside].sum())})
        low = high
    return out


def residual_breakdown(timings: Sequence[RunTiming], charge: dict[str, DecisionCharge | float]) -> dict:
    """Per method, each component's misprediction (``charge``: the decisions' charge), and binned curve ratios."""
    by_method: dict[str, list[RunTiming]] = defaultdict(list)
    for run in timings:
        by_method[run.method].append(run)
    speculative = [run for run in timings if run.method != "greedy"]
    return {
        "components": list(COMPONENTS),
        "methods": {name: _method_breakdown(runs, as_charge(charge.get(name, 0.0)))
                    for name, runs in by_method.items()},
        "curves": {f"{op} by {label}": _binned(speculative, op, axis) for op, label, axis in (
            ("verify", "verified size", "size"), ("verify", "draft depth", "depth"), ("verify", "context", "context"),
            ("draft", "tokens committed", "committed"), ("bookkeeping", "verified size", "size"))},
    }


CYCLE_OPS = ("draft", "verify", "policy", "bookkeeping")
CYCLE_AXES = ("context", "size", "depth", "committed", "accepted")


def cycle_table(phases: dict[str, Sequence[RunTiming]]) -> dict[str, np.ndarray]:
    """Every timed cycle of a validation as flat columns (``cycles.npz``), so residuals can be cut
    along any axis afterwards. ``phases``: name -> runs. Speculative cycles are ``cycle_*``, plain
    steps ``step_*``, whole runs ``run_*`` (row k: run k of its phase); ``*_method`` and ``*_phase``
    index ``methods`` and ``phases``; ``*_run`` numbers the run in its phase, ``*_slot`` its slot."""
    names = list(phases)
    methods = sorted({run.method for runs in phases.values() for run in runs})
    spec, step, whole = defaultdict(list), defaultdict(list), defaultdict(list)
    for p, runs in enumerate(phases.values()):
        for r, run in enumerate(runs):
            for key, value in (("phase", p), ("method", methods.index(run.method)), ("total", run.total_s),
                               ("prefill", run.prefill_s), ("prefill_predicted", run.prefill_predicted_s),
                               ("prompt_length", run.prompt_length), ("slot", run.slot)):
                whole[key].append(np.atleast_1d(value))
            n = len(run.cycles["context"])
            for key, value in (("phase", p), ("run", r), ("slot", run.slot)):
                (step if run.method == "greedy" else spec)[key].append(np.full(n, value))
            if run.method == "greedy":
                step["context"].append(run.cycles["context"])
                step["measured"].append(run.measured["greedy step"])
                step["predicted"].append(run.predicted["greedy step"])
                continue
            spec["method"].append(np.full(n, methods.index(run.method)))
            for axis in CYCLE_AXES:
                spec[axis].append(run.cycles[axis])
            for op in CYCLE_OPS:
                spec[f"measured_{op}"].append(run.measured[op])
                if op in run.predicted:
                    spec[f"predicted_{op}"].append(run.predicted[op])
    out = {"phases": np.array(names), "methods": np.array(methods)}
    for prefix, columns in (("cycle", spec), ("step", step), ("run", whole)):
        for key, parts in columns.items():
            out[f"{prefix}_{key}"] = np.concatenate(parts)
    return out
