"""docs/validation.md#where-the-verify-error-comes-from: a `validate --real --recalibrate` run's
timed cycles (RUN/cycles.npz) cut by hand. Each cycle's live verify time is held against the
*base* profile's verify curve at its (verified size, context), in each phase: the upfront
refit's ladder, the co-timed refit's, and the scored runs. Whether a refit's live / profile
ratio at a size carries over to the scored runs is the question every in-situ refit bets on.

    .venv/bin/python scripts/results/cycle-residuals.py RUN [PROFILE]

PROFILE defaults to the base profile the run names; it reads no model and times nothing."""
import json
import sys
from pathlib import Path

import numpy as np

from simspec.sim.profile import load_profile

run = Path(sys.argv[1])
report = json.loads((run / "report.json").read_text())
base = load_profile(sys.argv[2] if len(sys.argv) > 2 else report["profile"]["path"])
t = np.load(run / "cycles.npz")
phases, methods = list(t["phases"]), list(t["methods"])
phase, method = t["cycle_phase"], t["cycle_method"]
size, context = t["cycle_size"], t["cycle_context"]
live = t["cycle_measured_verify"]
ref = np.asarray(base.cost.verify(size, context), dtype=float)  # the base curve, before any refit
step_phase, step_live = t["step_phase"], t["step_measured"]
step_ref = np.asarray(base.cost.greedy(t["step_context"]), dtype=float)


def ratio(mask) -> str:
    return f"{live[mask].sum() / ref[mask].sum():.3f} ({int(mask.sum())})" if mask.any() else "—"


print(f"{run}: {len(size)} speculative cycles, {len(step_live)} plain decoding steps; base profile {base.directory}")
print("\nlive / base profile, plain decoding step, by phase: " + ", ".join(
    f"{name} {step_live[step_phase == p].sum() / step_ref[step_phase == p].sum():.3f}"
    for p, name in enumerate(phases) if (step_phase == p).any()))

print("\nverify, live / base profile by verified size (cycles) — one column per phase:")
print("V     " + "".join(f"{name:>18}" for name in phases))
for v in np.unique(size):
    print(f"{v:<6}" + "".join(f"{ratio((size == v) & (phase == p)):>18}" for p in range(len(phases))))

scored = phases.index("scored")
print("\nverify in the scored runs, live / base profile by context (rows) and size (columns, V <= 12):")
small = [v for v in np.unique(size[phase == scored]) if v <= 12]
edges = (0, 96, 160, 256, 100_000)
print("ctx       " + "".join(f"{v:>14}" for v in small))
for low, high in zip(edges, edges[1:]):
    inside = (phase == scored) & (context > low) & (context <= high)
    print(f"{low + 1:>4}-{high:<5}" + "".join(f"{ratio(inside & (size == v)):>14}" for v in small))

print("\nscored runs, per method: verify live / base, and its cycles' size mix")
for m, name in enumerate(methods):
    mask = (phase == scored) & (method == m)
    if mask.any():
        values, counts = np.unique(size[mask], return_counts=True)
        top = ", ".join(f"V{v}: {c}" for v, c in sorted(zip(values, counts), key=lambda x: -x[1])[:4])
        print(f"{name:<28} {ratio(mask):>16}   {top}")

# What the refit would have predicted had it priced every verified size at the ratio its ladder
# measured there (log-linear between ladder sizes, flat beyond): each scored cycle's base
# prediction times that scale. The method's new time error moves by the change in its predicted
# verify seconds over its live seconds, and its simulated speedup by the ratio of the two.
if "refit" in phases:
    from simspec.measure.insitu import log_interp

    at = phase == phases.index("refit")
    ladder = np.unique(size[at])
    scale = log_interp(ladder, np.array([live[at & (size == v)].sum() / ref[at & (size == v)].sum() for v in ladder]))
    scaled = ref * np.array([scale(v) for v in size])
    rows = {r["method"]: r for r in report["rows"]}
    timing = report["residuals"]["methods"]
    print("\nscored runs if every size were priced at the refit's own ratio (verify only):")
    print(f"{'method':<28}{'sim error now':>14}{'then':>10}")
    errors = []
    for m, name in enumerate(methods):
        mask = (phase == scored) & (method == m)
        if not mask.any() or name not in rows:
            continue
        seconds, before = timing[name]["seconds"], timing[name]["time_error"]
        after = before + (scaled[mask].sum() - t["cycle_predicted_verify"][mask].sum()) / seconds
        now = rows[name]["rel_error"]
        then = (1 + now) * (1 + before) / (1 + after) - 1
        errors.append(then)
        print(f"{name:<28}{now:>+14.1%}{then:>+10.1%}")
    print(f"mean |error| {np.mean([abs(r['rel_error']) for r in rows.values()]):.1%} -> {np.mean(np.abs(errors)):.1%}, "
          f"max {max(abs(r['rel_error']) for r in rows.values()):.1%} -> {np.max(np.abs(errors)):.1%}")
