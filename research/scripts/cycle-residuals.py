"""docs/validation.md#drift-inside-a-run-cycle-by-cycle: a `validate --real --recalibrate` run's
timed cycles (RUN/cycles.npz) cut by hand. Each cycle's live verify time is held against the
*base* profile's verify curve at its (verified size, context), in each phase: the upfront
refit's ladder, the co-timed refit's, and the scored runs; then per context, per method and in
time order; then what the run-to-run noise is (how a run's draft and verification, and
neighbouring runs, move together). Then the scored runs are rebuilt from their cycles
(components only) and priced under other refits — the upfront ladder's ratios taken as medians
over its runs instead of pooled, the co-timed ladder's (pooled, the plain step per context as
`validate` now refits it, medians over runs, the draft's first and later calls at their own
scales, each ladder run's verification over its own draft speed), both pooled, the upfront
shape at the co-timed level, each slot at its nearest co-timed steps — to see which would have
predicted best.

    .venv/bin/python research/scripts/cycle-residuals.py RUN [PROFILE]

PROFILE defaults to the base profile the run names; it reads no model and times nothing."""
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from runs import profile as load_profile
from runs import read_json

from simspec.measure.refit import context_ratios, log_interp, plain_step_grid
from simspec.measure.residuals import CYCLE_OPS

run = Path(sys.argv[1])
report = read_json(run / "report.json")
base = load_profile(sys.argv[2] if len(sys.argv) > 2 else report["profile"]["path"])
ran_on = (report["profile"].get("in_situ") or {}).get("inputs_hash")
if ran_on and base.meta.inputs_hash != ran_on:  # the base was re-measured since: its curves are not the run's
    sys.exit(f"{base.directory} is not the base profile this run refitted (inputs hash {ran_on}, created "
             f"{report['profile']['in_situ'].get('created')}): pass that profile as PROFILE (git show an older commit)")
t = np.load(run / "cycles.npz")
phases, methods = list(t["phases"]), list(t["methods"])
phase, method = t["cycle_phase"], t["cycle_method"]
size, context = t["cycle_size"], t["cycle_context"]
live = t["cycle_measured_verify"]
ref = np.asarray(base.cost.verify(size, context), dtype=float)  # the base curve, before any refit
step_phase, step_live = t["step_phase"], t["step_measured"]
step_ref = np.asarray(base.cost.greedy(t["step_context"]), dtype=float)


def ratio(mask) -> float:
    return live[mask].sum() / ref[mask].sum() if mask.any() else float("nan")


def cell(mask) -> str:
    return f"{ratio(mask):.3f} ({int(mask.sum())})" if mask.any() else "—"


print(f"{run}: {len(size)} speculative cycles, {len(step_live)} plain decoding steps; base profile {base.directory}")
print("\nlive / base profile, plain decoding step, by phase: " + ", ".join(
    f"{name} {step_live[step_phase == p].sum() / step_ref[step_phase == p].sum():.3f}"
    for p, name in enumerate(phases) if (step_phase == p).any()))

# The plain step along the context, per phase: one ratio for the whole curve carries from the
# refit's train prompts to the scored ones only where the live curve has the base's shape.
context_edges = np.arange(96, 321, 32)
print("plain decoding step, live / base by context (steps) — one row per phase:")
print(f"{'ctx':<10}" + "".join(f"{f'{lo + 1}-{hi}':>14}" for lo, hi in zip(context_edges, context_edges[1:])))
step_context = t["step_context"]
in_bin = [(step_context > lo) & (step_context <= hi) for lo, hi in zip(context_edges, context_edges[1:])]
for p, name in enumerate(phases):
    cells = [(step_phase == p) & b for b in in_bin]
    print(f"{name:<10}" + "".join(
        f"{f'{step_live[k].sum() / step_ref[k].sum():.3f} ({k.sum()})' if k.sum() >= 20 else '—':>14}" for k in cells))
if {"co-timed", "scored"} <= set(phases):  # the scored plain steps priced by the co-timed ratio, one or per context
    co_, sc_ = step_phase == phases.index("co-timed"), step_phase == phases.index("scored")
    one = step_live[co_].sum() / step_ref[co_].sum()
    mids = (context_edges[:-1] + context_edges[1:]) / 2
    ratios = np.array([step_live[k].sum() / step_ref[k].sum() if (k := co_ & b).sum() >= 20 else np.nan
                       for b in in_bin])
    by_context = np.interp(step_context[sc_], mids[~np.isnan(ratios)], ratios[~np.isnan(ratios)])
    live_scored = step_live[sc_].sum()
    print("scored plain steps priced by the co-timed ratio: one ratio "
          f"{one * step_ref[sc_].sum() / live_scored - 1:+.1%}, "
          f"per context (above, linear between bins) {(by_context * step_ref[sc_]).sum() / live_scored - 1:+.1%}")

print("\nverify, live / base profile by verified size (cycles) — one column per phase:")
print("V     " + "".join(f"{name:>18}" for name in phases))
for v in np.unique(size):
    print(f"{v:<6}" + "".join(f"{cell((size == v) & (phase == p)):>18}" for p in range(len(phases))))

scored = phases.index("scored")
print("\nverify in the scored runs, live / base profile by context (rows) and size (columns, V <= 12):")
small = [v for v in np.unique(size[phase == scored]) if v <= 12]
edges = (0, 96, 160, 256, 100_000)
print("ctx       " + "".join(f"{v:>14}" for v in small))
for low, high in zip(edges, edges[1:]):
    inside = (phase == scored) & (context > low) & (context <= high)
    print(f"{low + 1:>4}-{high:<5}" + "".join(f"{cell(inside & (size == v)):>14}" for v in small))

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
    print(f"{label:<14}" + "".join(f"{ratio((phase == scored) & sel & k):>12.3f}" for k in thirds(run_of)))

print("\nscored runs, per method: verify live / base, and its cycles' size mix")
for m, name in enumerate(methods):
    mask = (phase == scored) & (method == m)
    if mask.any():
        values, counts = np.unique(size[mask], return_counts=True)
        top = ", ".join(f"V{v}: {c}" for v, c in sorted(zip(values, counts), key=lambda x: -x[1])[:4])
        print(f"{name:<28} {cell(mask):>16}   {top}")

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
    per_slot = len(report["rows"]) + 1  # plain decoding, then every method
    slot, step_slot = run_of // per_slot, step_run // per_slot
    if "cycle_slot" in t.files:  # each run's slot as recorded: a scored run's (pass, prompt), a co-timed step
        step, step_step = t["cycle_slot"], t["step_slot"]
    elif ((t["run_phase"] == cotimed).sum() == (refit := report["co_timed_refit"]["refit"])["steps"]
          * (per_step := refit["trees_per_step"] + 1)):  # steps of one length: plain decoding, then its trees
        step, step_step = run_of // per_step, step_run // per_step
    else:  # steps of differing lengths (every targeted point, joined as methods ran), not recorded
        step = step_step = None
    by_refit = np.asarray(refit_profile.cost.verify(size, context), dtype=float)
    step_by_refit = np.asarray(refit_profile.cost.greedy(t["step_context"]), dtype=float)
    n_slots, n_prompts = int(slot[phase == scored].max()) + 1, report["n_prompts"]

    def slot_ratio(name: str) -> np.ndarray:
        k = methods.index(name)
        return np.array([ratio(c) for s in range(n_slots)
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

    def take(per_slot_values) -> float:  # as the report: each prompt's median over passes, then the median
        x = np.array(per_slot_values)
        return float(np.median([np.median(x[i::n_prompts]) for i in range(n_prompts)]))

    charge = report["decision_seconds_charged"]
    measured = sum(t[f"cycle_measured_{op}"] for op in CYCLE_OPS)

    def rebuild(price: Callable, greedy_price: Callable, over_the_set: bool = False,
                signed: bool = False) -> np.ndarray:
        """|error| per method of the scored runs rebuilt from their cycles: each slot's plain
        decoding over the method, live against ``greedy_price(steps, slot)`` over
        ``price(cycles, slot)`` (plus the method's decision charge); taken as the report's median
        over prompts, or ``over_the_set``: summed plain time over summed method time."""
        errors = []
        for name in charge:
            k = methods.index(name)
            live_g, live_m, sim_g, sim_m = (np.zeros(n_slots) for _ in range(4))
            for s in range(n_slots):
                c, g = (phase == scored) & (method == k) & (slot == s), (step_phase == scored) & (step_slot == s)
                live_g[s], live_m[s] = step_live[g].sum(), measured[c].sum()
                sim_g[s], sim_m[s] = greedy_price(g, s), price(c, s) + charge[name] * c.sum()
            if over_the_set:
                errors.append((sim_g.sum() / sim_m.sum()) / (live_g.sum() / live_m.sum()) - 1)
            else:
                errors.append(take(sim_g / sim_m) / take(live_g / live_m) - 1)
        return np.array(errors) if signed else np.abs(errors)

    predicted = t["cycle_predicted_draft"] + t["cycle_predicted_verify"] + t["cycle_predicted_bookkeeping"]
    cuts = [("one refit for the run", lambda c, s: predicted[c].sum(), lambda g, s: t["step_predicted"][g].sum())]
    if step is not None:
        factors = np.array([local(s) for s in range(n_slots)])
        cuts.append(("each slot priced by its neighbouring co-timed steps",
                     lambda c, s: predicted[c].sum() + t["cycle_predicted_verify"][c].sum() * (factors[s, 0] - 1),
                     lambda g, s: t["step_predicted"][g].sum() * factors[s, 1]))
    print("rebuilt from the cycles, mean / max |error| (median over prompts; over the set):")
    if step is None:
        print("  (no slot-local cut: this run's co-timed steps differ in length, and its cycles.npz predates *_slot)")
    for label, price, greedy_price in cuts:
        a, b = rebuild(price, greedy_price), rebuild(price, greedy_price, over_the_set=True)
        print(f"  {label:<52} {a.mean():.1%} / {a.max():.1%};  {b.mean():.1%} / {b.max():.1%}")

    # Which refit predicts: the scored runs rebuilt from their cycles under four ways to scale
    # the base profile: the upfront ladder's per-size ratios (what validate predicts with), the
    # co-timed ladder's, both ladders pooled, and the upfront ladder's shape (its ratio at each
    # size over its overall ratio) at the co-timed ladder's level.
    refit_phase = phases.index("refit")
    insitu = refit_profile.meta.in_situ["scales"]
    base_draft = t["cycle_predicted_draft"] / np.where(phase == scored, insitu["draft"], 1.0)
    base_step = step_ref  # the base curve at each plain step's context, whatever the refit scaled it by
    live_draft = t["cycle_measured_draft"]

    def per_size(at) -> Callable:
        ladder = np.unique(size[at])
        return log_interp(ladder, np.array([ratio(at & (size == v)) for v in ladder]))

    def level(at, step_at) -> tuple[float, float, float]:
        return (ratio(at), step_live[step_at].sum() / step_ref[step_at].sum(),
                live_draft[at].sum() / base_draft[at].sum())

    def by_run(num, den, at, runs) -> float:  # the median over runs of each run's own ratio
        return float(np.median([num[k].sum() / den[k].sum() for r in np.unique(runs[at])
                                if (k := at & (runs == r)).any() and den[k].sum() > 0]))

    def per_size_by_run(at) -> Callable:
        ladder = np.unique(size[at])
        return log_interp(ladder, np.array([by_run(live, ref, at & (size == v), run_of) for v in ladder]))

    up, co = phase == refit_phase, phase == cotimed
    both = up | co
    step_up, step_co = step_phase == refit_phase, step_phase == cotimed
    shape_up, level_up, level_co = per_size(up), level(up, step_up), level(co, step_co)
    drafted = base_draft > 0

    # Per run (numbered within its phase): live over base for verification and for drafting.
    # Drafting splits into the cycle's first call (it also feeds the last cycle's committed
    # tokens) and the later calls of `width` nodes, each priced by the base curve.
    run_key, run_at = np.unique(phase * 1_000_000 + run_of, return_inverse=True)
    per_run = lambda x: np.bincount(run_at, weights=x, minlength=len(run_key))  # noqa: E731
    depth, committed = t["cycle_depth"], t["cycle_committed"]
    first = np.asarray(base.cost.draft(committed.astype(float), context.astype(float)), dtype=float)
    later = np.maximum(depth - 2, 0) * np.asarray(base.cost.draft(float(base.meta.traces.width),
                                                                 context.astype(float)), dtype=float)
    first_share = np.where(drafted, first / np.maximum(first + later, 1e-12), 0.0)
    draft_first, draft_later = base_draft * first_share, base_draft * (1 - first_share)
    run_phase_, run_method_ = run_key // 1_000_000, np.zeros(len(run_key), dtype=int)
    run_method_[run_at] = method
    log_verify = np.log(per_run(live) / per_run(ref))
    with np.errstate(divide="ignore", invalid="ignore"):
        log_draft = np.log(per_run(live_draft) / per_run(base_draft))
    # The two draft scales that fit the co-timed runs' drafting best (relative error per run).
    from scipy.optimize import nnls
    fit_runs = (run_phase_ == cotimed) & (per_run(base_draft) > 0)
    split = np.stack([per_run(draft_first), per_run(draft_later)], axis=1)
    rho, _ = nnls(split[fit_runs] / per_run(live_draft)[fit_runs, None], np.ones(fit_runs.sum()))

    # What the noise is: each run's log ratio less its method's mean over the run's phase.
    timed = (run_phase_ != refit_phase) & np.isfinite(log_draft)
    group = run_phase_ * len(methods) + run_method_
    centred = lambda x: x - (np.bincount(group[timed], x[timed], group.max() + 1)  # noqa: E731
                             / np.maximum(np.bincount(group[timed], minlength=group.max() + 1), 1))[group]
    rv, rd = centred(log_verify)[timed], centred(log_draft)[timed]
    print(f"\nrun-to-run noise, co-timed and scored runs (log live / base per run, less its method's mean): "
          f"verify sd {rv.std():.3f}; draft and verify of one run correlate {np.corrcoef(rv, rd)[0, 1]:.2f} "
          f"(verify less draft: sd {(rv - rd).std():.3f}); draft's first call {rho[0]:.2f}x the base, the later "
          f"calls {rho[1]:.2f}x (co-timed fit)")
    # In time order: the co-timed runs are recorded as they run; a scored slot's runs in method order.
    lags, v_centred, ran = [], centred(log_verify), np.where(timed & (run_phase_ == cotimed))[0]
    for lag in (1, 2, 3, 5, 10):  # run k and run k + lag of the same phase (keys are phase * 1e6 + run)
        later_ = np.minimum(np.searchsorted(run_key, run_key[ran] + lag), len(run_key) - 1)
        pair = (run_key[later_] == run_key[ran] + lag) & timed[later_]
        lags.append(f"{lag} {np.corrcoef(v_centred[ran[pair]], v_centred[later_[pair]])[0, 1]:.2f}")
    print("  verify, correlation between co-timed runs k apart (greedy runs count): " + ", ".join(lags))
    print("  verify, live / base at each targeted point: ladder vs the methods at that V (raw; verify over the "
          "run's draft speed)")
    scored_methods = np.unique(method[phase == scored])
    modal_size = np.array([np.bincount(size[(phase == scored) & (method == k)]).argmax() for k in scored_methods])
    for d, v in report["co_timed_refit"]["refit"].get("targeted", []):
        tree = methods.index(f"static(D={d},V={v})") if f"static(D={d},V={v})" in methods else -1
        ladder_runs = (run_phase_ == cotimed) & (run_method_ == tree) & timed
        users = (run_phase_ == scored) & np.isin(run_method_, scored_methods[modal_size == v]) & timed  # their V is v
        if ladder_runs.any() and users.any():
            odds = [np.exp(np.mean((log_verify - log_draft)[m_])) for m_ in (ladder_runs, users)]
            print(f"    ({d}, {v}): {np.exp(np.mean(log_verify[ladder_runs])):.3f} vs "
                  f"{np.exp(np.mean(log_verify[users])):.3f};  {odds[0]:.3f} vs {odds[1]:.3f}")
    draft_by_call = rho[0] * draft_first + rho[1] * draft_later
    speed = np.ones(len(run_key))  # each co-timed run's draft speed over the fitted draft model
    speed[fit_runs] = per_run(live_draft)[fit_runs] / (split[fit_runs] @ rho)

    def per_size_over_speed(at) -> Callable:  # verify read against its own run's draft speed
        ladder, ref_sped = np.unique(size[at]), ref * speed[run_at]
        return log_interp(ladder, np.array([live[k].sum() / ref_sped[k].sum() for v in ladder
                                            if (k := at & (size == v)).any()]))
    def plain_per_context(at) -> np.ndarray:  # each step's scale under a refit of the plain step per context
        grid = plain_step_grid(base.samples)
        keys, k_at = np.unique(step_context[at], return_inverse=True)
        sums = [np.bincount(k_at, weights=x[at]) for x in (step_live, step_ref, np.ones_like(step_ref))]
        scales = context_ratios(grid, base.cost.greedy(grid), keys, *sums, overall=sums[0].sum() / sums[1].sum())
        return np.interp(step_context, grid, scales * base.cost.greedy(grid)) / step_ref

    strategies = {
        "upfront": (per_size(up), *level_up[1:]),
        # one hiccup among the upfront ladder's 8 plain runs moves a pooled ratio by several per cent
        "upfront, median over runs": (per_size_by_run(up), by_run(step_live, step_ref, step_up, step_run),
                                      by_run(live_draft, base_draft, up & drafted, run_of)),
        "co-timed": (per_size(co), *level_co[1:]),
        # the plain step's curve scaled per grid context (what validate predicts with since 2026-11-27)
        "co-timed, plain step per context": (per_size(co), plain_per_context(step_co), level_co[2]),
        "co-timed, median over runs": (per_size_by_run(co), by_run(step_live, step_ref, step_co, step_run),
                                       by_run(live_draft, base_draft, co & drafted, run_of)),
        # the draft's first call and its later calls at their own scales
        "co-timed, draft by call": (per_size(co), level_co[1], draft_by_call),
        # each ladder run's verification over its own draft speed (the machine's, at that moment)
        "co-timed, verify over draft speed": (per_size_over_speed(co), level_co[1], draft_by_call),
        "pooled": (per_size(both), *level(both, step_up | step_co)[1:]),
        "upfront shape, co-timed level": (lambda v: shape_up(v) * level_co[0] / level_up[0], *level_co[1:]),
    }
    others = t["cycle_predicted_bookkeeping"]  # bookkeeping as the refit priced it
    print("\nthe scored runs rebuilt from their cycles (components only) under each refit, mean / max |error|:")
    print(f"  {'':<32} {'median over prompts':>20} {'over the set':>16}")
    signed = {}
    for label, (scale, greedy_scale, draft_scale) in strategies.items():
        verify_at = ref * np.array([scale(v) for v in size])
        drafting = draft_scale * base_draft if np.isscalar(draft_scale) else draft_scale
        price = lambda c, s, v=verify_at, d=drafting: v[c].sum() + d[c].sum() + others[c].sum()  # noqa: E731
        greedy_price = lambda g, s, k=greedy_scale: (k * base_step)[g].sum()  # noqa: E731
        a, b = rebuild(price, greedy_price), rebuild(price, greedy_price, over_the_set=True, signed=True)
        signed[label] = (rebuild(price, greedy_price, signed=True), b)
        b = np.abs(b)
        print(f"  {label:<32} {f'{a.mean():.1%} / {a.max():.1%}':>20} {f'{b.mean():.1%} / {b.max():.1%}':>16}")
    # The yardstick: how far each method's speedup over the set moves from pass to pass (standard
    # error over the passes), and the mean / max |error| an exact model would show against that.
    passes = n_slots // n_prompts
    if passes >= 2:
        se = []
        for name in charge:
            k = methods.index(name)
            per_pass = []
            for p in range(passes):
                in_pass = (slot >= p * n_prompts) & (slot < (p + 1) * n_prompts)
                g = (step_phase == scored) & (step_slot >= p * n_prompts) & (step_slot < (p + 1) * n_prompts)
                per_pass.append(step_live[g].sum() / measured[(phase == scored) & (method == k) & in_pass].sum())
            se.append(np.std(per_pass, ddof=1) / np.sqrt(passes) / np.mean(per_pass))
        draws = np.abs(np.random.default_rng(0).normal(size=(20_000, len(se))) * np.array(se))
        noise = f"{draws.mean():.1%} / {draws.max(axis=1).mean():.1%}"
        print(f"  {'exact model vs the noise':<32} {'':>20} {noise:>16}")
    print("\nper method under the co-timed refit, signed error (median over prompts / over the set):")
    for name, a, b in zip(charge, *signed["co-timed"]):
        print(f"  {name:<28} {a:+7.1%} {b:+7.1%}")
