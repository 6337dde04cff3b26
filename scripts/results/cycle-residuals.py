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

from simspec.measure.residuals import CYCLE_OPS
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

# Drift inside the scored runs: the same operations, early and late. A ratio that moves for
# verification and not for the plain step moves every speedup, and no static curve follows it.
run_of, step_run = t["cycle_run"], t["step_run"]
edges = np.quantile(run_of[phase == scored], [0, 1 / 3, 2 / 3, 1])
print("\nscored runs in time order (thirds), live / base profile:")
print(f"{'':<14}" + "".join(f"{name:>12}" for name in ("first", "second", "third")))
thirds = lambda r: [(r >= lo) & (r <= hi) if i == 0 else (r > lo) & (r <= hi)  # noqa: E731
                    for i, (lo, hi) in enumerate(zip(edges, edges[1:]))]
greedy_by = [step_live[(step_phase == scored) & k].sum() / step_ref[(step_phase == scored) & k].sum()
             for k in thirds(step_run)]
print(f"{'plain step':<14}" + "".join(f"{g:>12.3f}" for g in greedy_by))
for label, sel in (("verify V 6", size == 6), ("verify V 8", size == 8), ("verify V >= 32", size >= 32)):
    cells = [ratio((phase == scored) & sel & k).split()[0] for k in thirds(run_of)]
    print(f"{label:<14}" + "".join(f"{c:>12}" for c in cells))

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

# Run-to-run noise and drift tracking. Scored runs go slot by slot (one prompt in one pass: plain
# decoding and every method, back to back), and after each slot the co-timed refit runs one
# step (plain decoding and four ladder trees). Two questions: how far apart are two methods'
# verification costs at the same size inside one slot, seconds apart; and would pricing each
# slot with the co-timed ratios of its neighbouring steps (a profile that tracks drift) predict
# better than one refit for the whole run? Speedups here are rebuilt from the cycles (components
# only, no prefill), per slot, then as the report takes them: median over passes, then prompts.
if "co-timed" in phases:
    cotimed = phases.index("co-timed")
    refit_profile = load_profile(run / "profile")
    per_slot, per_step = len(report["rows"]) + 1, 5
    slot, step_slot = run_of // per_slot, step_run // per_slot
    step, step_step = run_of // per_step, step_run // per_step
    by_refit = np.asarray(refit_profile.cost.verify(size, context), dtype=float)
    step_by_refit = np.asarray(refit_profile.cost.greedy(t["step_context"]), dtype=float)
    n_slots, n_prompts = int(slot[phase == scored].max()) + 1, report["n_prompts"]

    def slot_ratio(name: str) -> np.ndarray:
        k = methods.index(name)
        return np.array([live[c].sum() / ref[c].sum() for s in range(n_slots)
                         if (c := (phase == scored) & (method == k) & (slot == s)).any()])

    v6 = [name for name in methods if name in {r["method"] for r in report["rows"]}
          and set(np.unique(size[(phase == scored) & (method == methods.index(name))])) == {6}]
    if len(v6) >= 2:
        a, b = slot_ratio(v6[0]), slot_ratio(v6[1])
        print(f"\nsame slot, same size (V 6): {v6[0]} / {v6[1]} verification cost per slot ranges "
              f"{(a / b).min():.2f}-{(a / b).max():.2f} (median {np.median(a / b):.3f}, {n_slots} slots)")

    def local(s: int, width: int = 1) -> tuple[float, float]:
        c = (phase == cotimed) & (np.abs(step - s) <= width)
        g = (step_phase == cotimed) & (np.abs(step_step - s) <= width)
        return live[c].sum() / by_refit[c].sum(), step_live[g].sum() / step_by_refit[g].sum()

    factors = np.array([local(s) for s in range(n_slots)])
    charge = report["decision_seconds_charged"]
    measured = sum(t[f"cycle_measured_{op}"] for op in CYCLE_OPS)
    predicted = t["cycle_predicted_draft"] + t["cycle_predicted_verify"] + t["cycle_predicted_bookkeeping"]
    rebuilt = []
    for name in charge:
        k = methods.index(name)
        real_s, one_s, tracked_s = [], [], []
        for s in range(n_slots):
            c, g = (phase == scored) & (method == k) & (slot == s), (step_phase == scored) & (step_slot == s)
            spent, priced = measured[c].sum(), predicted[c].sum() + charge[name] * c.sum()
            tracked = priced + t["cycle_predicted_verify"][c].sum() * (factors[s, 0] - 1)
            greedy_live, greedy_priced = step_live[g].sum(), t["step_predicted"][g].sum()
            real_s.append(greedy_live / spent)
            one_s.append(greedy_priced / priced)
            tracked_s.append(greedy_priced * factors[s, 1] / tracked)
        take = lambda x: np.median([np.median(np.array(x)[i::n_prompts]) for i in range(n_prompts)])  # noqa: E731
        real_m = take(real_s)
        rebuilt.append((take(one_s) / real_m - 1, take(tracked_s) / real_m - 1))
    one, tracked = np.abs(np.array(rebuilt)).T
    print(f"rebuilt from the cycles: one refit for the run {one.mean():.1%} mean / {one.max():.1%} max |error|; "
          f"each slot priced by its neighbouring co-timed steps {tracked.mean():.1%} / {tracked.max():.1%}")
