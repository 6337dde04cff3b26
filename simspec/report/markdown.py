"""``report.md`` of a ``validate --real`` run: the table a paper would print, then fidelity, drift,
residual and lossless notes."""

from __future__ import annotations

from simspec.report.validation import ReportProfile, ReportRow, ValidationReport, fidelity_rows


def spread(row: ReportRow) -> str:
    """A row's spread: the 95 % CI of the mean at T > 0, the IQR of per-prompt speedups when greedy."""
    if row.statistic == "mean":
        low, high = row.speedup_real_ci95
        return f"{low:.2f}–{high:.2f}"
    return f"{row.speedup_real_q25:.2f}–{row.speedup_real_q75:.2f}"


def _p(value) -> str:
    if value is None:
        return "—"
    return f"{value:.1e}" if value < 1e-3 else f"{value:.3f}"


def _pct(value) -> str:
    return "—" if value is None else f"{value:+.1%}"


def rank_text(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def render_residuals(residuals: dict) -> list[str]:
    """The residual section of ``report.md`` (``simspec.measure.residuals`` computes it)."""
    components = residuals["components"]
    lines = ["## Where the prediction misses", "",
             "Mispredicted time per component, as a share of the method's live time (predicted − live; "
             "negative: the model predicts less than the engine spends). *other*: live time outside the "
             "components (resets, Python between cycles), which the model does not predict.", "",
             "| method | " + " | ".join(components) + " | time error |",
             "| --- | " + " | ".join("---:" for _ in components) + " | ---: |"]
    for name, row in residuals["methods"].items():
        shares = row["mispredicted_share"]
        lines.append(f"| {name} | " + " | ".join(f"{shares[c]:+.1%}" if c in shares else "" for c in components)
                     + f" | {row['time_error']:+.1%} |")
    lines += ["", "Live / predicted along the operating point (all methods' cycles pooled):", ""]
    for curve, bins in residuals["curves"].items():
        if bins:
            lines.append(f"- {curve}: " + ", ".join(f"{b['bin']}: {b['live_over_predicted']:.2f} ({b['cycles']})"
                                                   for b in bins))
    return lines


def over_the_set_table(m: ValidationReport) -> list[str]:
    """Per method over the set: real, simulated and error; the prediction's interval (the
    profile's spread and this run's drift) where the profile has one; the co-timed refit's."""
    co_rows = {r["method"]: r for r in (m.co_timed_refit.rows if m.co_timed_refit else [])}
    with_co = bool(co_rows) and "speedup_sim_set" in next(iter(co_rows.values()))
    with_interval = m.intervals is not None
    lines = ["", "Over the set, per method" + (f" (interval: the prediction's {m.intervals['percentiles'][0]}-"
                                               f"{m.intervals['percentiles'][1]} % under {m.intervals['sources']}; "
                                               f"the real speedup inside it for {m.intervals['coverage']:.0%} of "
                                               "the methods)" if with_interval else "") + ":", "",
             "| method | real | sim | error |" + (" interval | inside |" if with_interval else "")
             + (" sim (co-timed) | error |" if with_co else ""),
             "| --- | ---: | ---: | ---: |" + (" ---: | :---: |" if with_interval else "")
             + (" ---: | ---: |" if with_co else "")]
    for r in sorted(m.rows, key=lambda r: -r.speedup_real_set):
        c = co_rows.get(r.method) if with_co else None
        interval = ""
        if with_interval and r.speedup_sim_set_interval:
            lo, hi = r.speedup_sim_set_interval
            interval = f" {lo:.3f}–{hi:.3f} | {'yes' if r.in_interval else '**no**'} |"
        lines.append(f"| {r.method} | {r.speedup_real_set:.3f} | {r.speedup_sim_set:.3f} | {r.rel_error_set:+.1%} |"
                     + interval + (f" {c['speedup_sim_set']:.3f} | {c['rel_error_set']:+.1%} |" if c else ""))
    corrected = m.drift_corrected.over_the_set if m.drift_corrected else None
    if corrected:
        lines += ["", f"Over the set, net of this run's drift (each curve rescaled by its live / profile ratio): "
                  f"mean |error| {corrected.mean_abs_rel_error:.1%}, max {corrected.max_abs_rel_error:.1%}."]
    return lines


def render_staleness(m: ValidationReport) -> list[str]:
    """The profile's age and machine, and plain decoding's drift before, through and after the runs."""
    st = m.staleness
    if not st:
        return []
    age = "unknown" if st.get("age_hours") is None else f"{st['age_hours']:.1f} h"
    plain = st["plain_live_over_profile"]
    lines = ["", f"**Profile staleness:** fitted {st.get('fitted')} ({age} before this run; "
             + ("calibrate's engine fit" if st.get("engine_fit") else "no engine fit: tight-loop curves")
             + f"); measured on {st['profile_device_model']}, run on {st['device_model']}"
             + ("" if st["same_device"] else " (**another machine**)") + ". Plain decoding, live / profile: "
             + ", ".join(f"{k} {v:.3f}" for k, v in plain.items()) + f" (moved {st['plain_moved']:.1%})."]
    lines += [f"- {note}." for note in st.get("notes", [])]
    return lines


def predicted_by(profile: ReportProfile, staleness: dict | None = None) -> str:
    """One sentence: which profile predicted, and when its latencies were measured."""
    when = f", measured {profile.created}" if profile.created else ""
    if profile.refit == "this run":
        return (f"Predicted with {profile.path} refitted in situ in this run, right before the scored runs, on "
                f"train prompts of the same set (`--recalibrate`; saved in profile/{when}).")
    if profile.in_situ:
        return (f"Predicted with {profile.path}: {profile.in_situ['name']} refitted in situ "
                f"(`simspec recalibrate`){when}.")
    if staleness and staleness.get("engine_fit"):
        return f"Predicted with {profile.path}: calibrate's latency curves, fitted to the engine's cycles{when}."
    return f"Predicted with {profile.path}: calibrate's tight-loop latency curves, not fitted to the engine{when}."


def render_markdown(report: ValidationReport) -> str:
    """``report.md``: the table a paper would print, then fidelity, drift and lossless notes."""
    m = report
    lines = [f"# validate --real: {m.profile.name}", "",
             f"{m.n_prompts} {m.prompts} ({m.split}) prompts, {m.max_new_tokens} new tokens, "
             f"{m.repeats} pass(es); target {m.target}, draft {m.draft}; device {m.device}; {m.runtime} runtime"
             + (f" (compiled in {m.compile_s:.0f} s, before the timed runs)" if m.compile_s else "") + "; "
             f"simspec {m.simspec_version}, {m.created}. " + predicted_by(m.profile, m.staleness), "",
             _method_text(m), "", *_rows_table(m), *_fidelity(m)]
    if m.rows[0].speedup_real_set is not None:
        lines += over_the_set_table(m)
    lines += _noise_and_refit(m)
    if m.rank_inversions:
        lines += ["", "Pairs the simulator orders differently from the real runs:"]
        for inv in m.rank_inversions:
            lines.append(f"- {inv['a']} vs {inv['b']}: real {inv['real_difference']:+.3f}, sim "
                         f"{inv['sim_difference']:+.3f}; real paired p = {_p(inv['p_real'])}"
                         + (" (the real runs cannot tell them apart)" if (inv["p_real"] or 0) > 0.05 else ""))
    drift = m.drift
    lines += ["", "**Drift** (live latency / profile's curve, summed over the run): "
              + ", ".join(f"{op} {ratio:.2f}" for op, ratio in drift.ratios.items()) + "."]
    if drift.advice:
        lines.append(f"**Warning:** {drift.advice}.")
    lines += render_staleness(m)
    lines += ["", *_lossless(m)]
    if m.residuals:
        lines += ["", *render_residuals(m.residuals)]
    return "\n".join(lines) + "\n"


def _method_text(m: ValidationReport) -> str:
    """How the table's numbers were made: paired runs, the statistic, the tests."""
    if m.temperature:
        return (f"Temperature {m.temperature:g} (top-p {m.top_p:g}): every pass samples each prompt with its "
                f"own seed (pass k, prompt i: {m.seed} + k · prompts + i), the same for plain sampling and every "
                "method. Speedup = plain sampling's time per token / the method's, on the same prompt and seed, "
                "measured back to back (order rotated per prompt); mean over prompts and seeds [95 % CI over "
                "prompts]. *sim*: the simulator's expected speedup on the same prompts, one sampled continuation "
                "recorded per (pass, prompt) with the same seed, acceptance drawn from each tree's law (8 draws), "
                "replayed with the profile's cost model; *drift-corrected*: the same with each latency curve "
                "rescaled by its live / profile ratio in this run. p: two-sided Wilcoxon signed-rank test on "
                "per-seed speedups; gain: median per-seed ratio. Lossless: KS test of every output token's "
                "randomised PIT under the target's distribution.")
    return ("Speedup = plain greedy time / method time on the same prompt, measured back to back (order "
            "rotated per prompt); median over prompts [IQR]. *sim*: the simulator's prediction for the same "
            "prompts (their trees recorded in this run, replayed with the profile's cost model); "
            "*drift-corrected*: the same with each latency curve rescaled by its live / profile ratio in this "
            "run. p: two-sided Wilcoxon signed-rank test on per-prompt speedups; gain: median per-prompt ratio.")


def _rows_table(m: ValidationReport) -> list[str]:
    """One row per method, fastest first."""
    lines = [f"| method | real | {'95 % CI' if m.temperature else 'IQR'} | sim | sim error | sim, drift-corrected | "
             "error | τ real / sim | draft calls | decision µs / cycle, real (charged) | draft / verify / policy / "
             "bookkeeping | gain vs EAGLE-3 | p | gain vs grid | p | lossless |",
             "| --- " + "| ---: " * 14 + "| :---: |"]
    for r in sorted(m.rows, key=lambda r: -r.speedup_real):
        s = r.time_shares
        lines.append(
            f"| {r.method} | {r.speedup_real:.3f} | {spread(r)} | "
            f"{r.speedup_sim:.3f} | {r.rel_error:+.1%} | {r.speedup_sim_drift_corrected:.3f} | "
            f"{r.rel_error_drift_corrected:+.1%} | {r.tau:.2f} / {r.tau_sim:.2f} | "
            f"{r.draft_calls:.1f} | {r.decision_seconds_per_cycle * 1e6:.0f} "
            f"({m.decision_seconds_charged.get(r.method, 0.0) * 1e6:.0f}) | "
            f"{s['draft']:.0%} / {s['verify']:.0%} / {s['policy']:.1%} / "
            f"{s['bookkeeping']:.1%} | {_pct(r.gain_vs_eagle3)} | {_p(r.p_vs_eagle3)} | "
            f"{_pct(r.gain_vs_grid)} | {_p(r.p_vs_grid)} | "
            f"{r.verdict(no='**NO**')} |")
    return lines


def _fidelity(m: ValidationReport) -> list[str]:
    """Every prediction of the run, scored both ways (over the set, median over prompts)."""
    fidelity = fidelity_rows(m)
    head = fidelity[0]
    return [
        "",
        f"**Simulator fidelity** ({head['prediction']}, {head['statistic']}): mean |relative error| "
        f"{head['mean']:.1%}, max {head['max']:.1%} over {len(m.rows)} methods; rank agreement (Spearman) "
        f"{rank_text(head['spearman'])}. *Over the set*: plain decoding's time per token / the method's, each summed "
        "over every prompt and pass (the throughput ratio); *median over prompts*: the table above. Every "
        "prediction of this run, scored both ways (the last column: what an exact simulator would show against "
        "this run's pass-to-pass noise):",
        "",
        "| prediction | statistic | mean \\|error\\| | max | Spearman | exact model vs the noise (mean / max) |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
        *(f"| {f['prediction']} | {f['statistic']} | {f['mean']:.1%} | {f['max']:.1%} | {rank_text(f['spearman'])} | "
          + ("—" if f["noise_mean"] is None else f"{f['noise_mean']:.1%} / {f['noise_max']:.1%}") + " |"
          for f in fidelity),
        "",
        f"With the profile's curves rescaled by this run's drift (below), median over prompts: mean "
        f"{m.drift_corrected.mean_abs_rel_error:.1%}, max {m.drift_corrected.max_abs_rel_error:.1%}, "
        f"Spearman {rank_text(m.drift_corrected.rank_agreement)}.",
    ]


def _noise_and_refit(m: ValidationReport) -> list[str]:
    """The runs' own noise, and the co-timed refit's predictions where the run made one."""
    lines: list[str] = []
    noise = m.measurement_noise
    if noise:
        lines += ["", f"**Measurement noise:** the real runs' own pass-to-pass standard error of a method's median "
                  f"speedup is {noise['se_median']:.1%} (median over methods; {min(noise['se'].values()):.1%}–"
                  f"{max(noise['se'].values()):.1%}); against runs this noisy an exact simulator would show mean "
                  f"|error| ≈ {noise['exact_model_mean_abs_rel_error']:.1%}, max ≈ "
                  f"{noise['exact_model_max_abs_rel_error']:.1%}."]
    co = m.co_timed_refit
    if co:
        lines += ["", f"**Co-timed refit** (the ladder on train prompts, {co.refit['steps']} steps, one after each "
                  f"scored prompt; its profile in `profile-cotimed/`): mean |relative error| "
                  f"{co.mean_abs_rel_error:.1%}, max {co.max_abs_rel_error:.1%}, Spearman "
                  f"{rank_text(co.rank_agreement)}.", "",
                  "| method | real | sim (co-timed) | error |", "| --- | ---: | ---: | ---: |"]
        lines += [f"| {r['method']} | {r['speedup_real']:.3f} | {r['speedup_sim']:.3f} | {r['rel_error']:+.1%} |"
                  for r in co.rows]
    return lines


def _lossless(m: ValidationReport) -> list[str]:
    """Whether every output was the target's: token for token (greedy), or in distribution."""
    bad = [(r.method, d) for r in m.rows for d in r.divergences]
    lines: list[str] = []
    if m.temperature:
        failed = [r.method for r in m.rows if not r.lossless]
        lines.append("**Lossless (statistical):** τ simulated vs real, mean |error| "
                     f"{m.mean_abs_tau_rel_error:.1%}. "
                     + ("The outputs' PIT is not rejected as Uniform(0, 1) for any method." if not failed else
                        f"The outputs' PIT is rejected as Uniform(0, 1) for **{', '.join(failed)}**: a sampler that "
                        "does not follow the target's distribution (or a 1-in-1,000 false alarm per method)."))
    elif not bad:
        lines.append("**Lossless:** every output of every method equals plain greedy decoding, token for token.")
    else:
        lines.append("**Outputs that differ from greedy decoding** (top-2 logit gap of the target there):")
        lines += [f"- {name}, {d['prompt']}: token {d['position']}, gap {d['top2_gap']:.2e}"
                  f" ({'near-tie' if d['near_tie'] else 'BUG'})" for name, d in bad]
    if m.near_tie_cut_traces:
        lines.append(f"\n{m.near_tie_cut_traces} recorded trace(s) were cut short where batched and "
                     "unbatched arithmetic split a near-tie; their simulated runs are shorter.")
    return lines


