"""`validate --real` and `demo`: the report's arithmetic, the drift meter, bad input, and the
whole loop end to end on the demo pair (real target, shipped drafter and traces)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import ROOT, cli, last_json, simspec

from simspec.engine.records import CycleRecord, Generation
from simspec.measure.interleave import DriftMeter, MethodRuns, rescaled_cost
from simspec.report.markdown import render_markdown
from simspec.report.validation import ValidationReport, build_report, summary_line
from simspec.sim.profile import load_profile
from simspec.sim.replay import ReplayResult
from simspec.stats import paired_p


def _runs(name: str, family: str, speedups) -> MethodRuns:
    """One pass: on prompt i plain decoding takes 1 s and the method 1 / speedups[i], 20 tokens each."""
    runs = MethodRuns(name, family, by_repeat=[list(speedups)], times=[[(1.0, 20, 1 / s, 20) for s in speedups]])
    n = len(speedups)
    runs.tokens, runs.cycles, runs.draft_calls, runs.policy_seconds = [20] * n, [10] * n, [30] * n, [0.0] * n
    runs.shares = [{"draft": 0.2, "verify": 0.7, "policy": 0.0, "bookkeeping": 0.02, "prefill": 0.08}] * n
    runs.actions = [[3, 6, 1]] * (10 * n)
    return runs


def _replayed(speedups) -> ReplayResult:
    """A replay whose per-prompt speedups are ``speedups`` (prefill 0, greedy 1 s)."""
    s = np.asarray(speedups, dtype=float)
    n = len(s)
    return ReplayResult(1 / s, np.ones(n), np.zeros(n), np.full(n, 20), np.full(n, 10), np.full(n, 30), np.zeros(n),
                        np.full(n, 20), np.zeros(n))


class _NoDrift:
    def ratios(self):
        return {"verify": 1.0}

    def drifted(self):
        return []


def _typed(report: dict, **header) -> ValidationReport:
    """A built report with the run's header (what validate --real adds), read as the report file is."""
    return ValidationReport.of(report | {"profile": {"name": "p", "path": "p"}, "prompts": "p", "split": "heldout",
                                         "max_new_tokens": 8, "target": "t", "draft": "d", "device": "cpu",
                                         "simspec_version": "x", "created": "now", **header})


def test_report_errors_ranks_and_paired_tests():
    rng = np.random.default_rng(0)
    base = rng.uniform(0.6, 0.8, 12)
    real = {"eagle3": base, "grid": base * 1.8, "ltd": base * 1.9 + 0.01}
    runs = [_runs(name, name if name != "ltd" else "policy:ltd", v) for name, v in real.items()]
    sim = {"eagle3": _replayed(base * 1.02), "grid": _replayed(base * 1.8), "ltd": _replayed(base * 1.7)}
    report = build_report({"n_prompts": 12}, runs, sim, _NoDrift(), sim)
    rows = {r["method"]: r for r in report["rows"]}
    assert rows["eagle3"]["rel_error"] == pytest.approx(0.02)
    assert rows["grid"]["rel_error"] == pytest.approx(0.0)
    expected = (np.median(base * 1.7) - np.median(real["ltd"])) / np.median(real["ltd"])
    assert rows["ltd"]["rel_error"] == pytest.approx(expected)
    assert report["mean_abs_rel_error"] == pytest.approx(np.mean([0.02, 0.0, abs(expected)]))
    # Over the set: total plain time / total method time, on both sides (every prompt 1 s plain).
    for name, factor in (("eagle3", 1.02), ("grid", 1.8), ("ltd", 1.7)):
        real_set = len(base) / np.sum(1 / real[name])
        assert rows[name]["speedup_real_set"] == pytest.approx(real_set)
        assert rows[name]["speedup_sim_set"] == pytest.approx(len(base) / np.sum(1 / (base * factor)))
        assert rows[name]["rel_error_set"] == pytest.approx(rows[name]["speedup_sim_set"] / real_set - 1)
    assert report["over_the_set"]["mean_abs_rel_error"] == pytest.approx(
        np.mean([abs(r["rel_error_set"]) for r in rows.values()]))
    assert rows["grid"]["rel_error_set"] == pytest.approx(0.0) and rows["ltd"]["rel_error_set"] < -0.05
    # The simulator puts grid above LTD, the real runs the other way round: one inversion.
    assert [(i["a"], i["b"]) for i in report["rank_inversions"]] == [("grid", "ltd")]
    assert report["rank_agreement"] == pytest.approx(0.5)
    # Paired tests: against itself none; LTD is faster than EAGLE-3 on all 12 prompts.
    assert rows["eagle3"]["p_vs_eagle3"] is None and rows["grid"]["p_vs_grid"] is None
    assert rows["ltd"]["p_vs_eagle3"] < 0.01 and rows["ltd"]["gain_vs_eagle3"] > 0.8
    assert paired_p(base, base) == 1.0
    line = summary_line(_typed(report), "real/x")
    assert set(line) == {"run", "temperature", "rows", "mean_abs_rel_error", "rank_agreement", "fidelity",
                         "over_the_set", "intervals", "staleness"}
    assert set(line["rows"][0]) == {"method", "speedup_real", "speedup_real_ci95", "speedup_sim", "rel_error", "tau",
                                    "tau_real", "tau_sim", "lossless", "pit_p", "p_vs_eagle3", "speedup_real_set",
                                    "speedup_sim_set", "rel_error_set", "speedup_sim_set_interval", "in_interval"}
    # No co-timed refit here: the headline is the profile over the set, then the median over prompts.
    assert [(f["prediction"], f["statistic"]) for f in line["fidelity"]] == [
        ("profile", "over the set"), ("profile", "median over prompts")]
    assert line["fidelity"][0]["mean"] == report["over_the_set"]["mean_abs_rel_error"]
    assert line["rows"][0]["pit_p"] is None and rows["grid"]["statistic"] == "median"
    json.dumps(report)  # everything in it is JSON


def test_sampled_report_takes_means_over_seeds_pairs_by_seed_and_judges_the_pit():
    """At T > 0 a row's speedup is the mean over (prompt, seed) with a CI over prompts, the
    simulator's per-(pass, prompt) expectations fold to prompts the same way, paired tests pair
    seeds, and the lossless verdict is the KS test of the outputs' PIT."""
    rng = np.random.default_rng(1)
    passes, n = 3, 6
    base = rng.uniform(0.8, 1.2, (passes, n))  # [pass][prompt]
    runs = []
    for name, family, factor, pit in (("eagle3", "eagle3", 1.0, rng.random(900)),
                                       ("grid", "grid", 1.3, rng.random(900) ** 2)):  # the grid's PIT is skewed
        r = MethodRuns(name, family, by_repeat=(base * factor).tolist(), sampled=True, pit=list(pit),
                       times=[[(1.0, 20, 1 / x, 20) for x in row] for row in (base * factor).tolist()])
        r.tokens, r.cycles, r.draft_calls = [20] * (passes * n), [8] * (passes * n), [30] * (passes * n)
        r.policy_seconds = [0.0] * (passes * n)
        r.shares = [{"draft": 0.2, "verify": 0.7, "policy": 0.0, "bookkeeping": 0.02, "prefill": 0.08}]
        r.actions = [[3, 6, 1]]
        runs.append(r)
    sim = {"eagle3": _replayed((base * 1.1).reshape(-1)), "grid": _replayed((base * 1.3).reshape(-1))}
    report = build_report({"n_prompts": n, "temperature": 1.0}, runs, sim, _NoDrift(), sim)
    rows = {r["method"]: r for r in report["rows"]}
    e, g = rows["eagle3"], rows["grid"]
    assert e["statistic"] == "mean" and e["speedup_real"] == pytest.approx(base.mean())
    assert e["per_prompt"]["speedup_real"] == pytest.approx(base.mean(0).tolist())
    assert e["speedup_sim"] == pytest.approx(1.1 * base.mean()) and e["rel_error"] == pytest.approx(0.1)
    low, high = e["speedup_real_ci95"]
    assert low < base.mean() < high and high - low < 0.5
    assert e["tau_real"] == pytest.approx(2.5) and e["tau_sim"] == pytest.approx(2.0)
    assert e["tau_rel_error"] == pytest.approx(-0.2) and report["mean_abs_tau_rel_error"] == pytest.approx(0.2)
    assert len(g["per_seed"]["speedup_real"]) == passes * n  # paired by seed: 18 pairs, all 30 % apart
    assert g["gain_vs_eagle3"] == pytest.approx(0.3) and g["p_vs_eagle3"] < 1e-3
    assert e["lossless"] and e["pit_p"] > 1e-3 and not g["lossless"] and g["pit_p"] < 1e-6
    typed = _typed(report, temperature=1.0, top_p=1.0, seed=0, repeats=passes)
    rows = {r.method: r for r in typed.rows}
    assert "yes (PIT p" in rows["eagle3"].verdict() and "NO (PIT p" in rows["grid"].verdict()
    assert "95 % CI" in render_markdown(typed)


def test_drift_meter_and_rescaled_cost():
    profile = load_profile(ROOT / "calibration" / "cpu-demo")
    cost = profile.cost
    slower = {"greedy": 1.3, "verify": 1.2, "draft": 0.9}
    greedy = Generation(list(range(6)), 100, float(cost.prefill(100)), 1.0,
                        [CycleRecord(1, 1, 1, 0, 0, 0.0, float(cost.greedy(100 + i)) * slower["greedy"], 0.0, 0.0)
                         for i in range(5)])
    # Two speculative cycles: depth 4, V 6, the first accepting 2 tokens.
    verify = [float(cost.verify(6, 100)), float(cost.verify(6, 103))]
    draft = [float(cost.draft(1, 100) + 2 * cost.draft(10, 100)), float(cost.draft(3, 103) + 2 * cost.draft(10, 103))]
    spec = Generation(list(range(5)), 100, 0.0, 1.0,
                      [CycleRecord(4, 10, 6, a, 3, d * slower["draft"], v * slower["verify"], 0.0, 0.0)
                       for a, d, v in zip((2, 0), draft, verify)])
    meter = DriftMeter(cost, 10)
    meter.greedy(greedy)
    meter.speculative(spec)
    ratios = meter.ratios()
    for operation, curve in (("greedy step", "greedy"), ("verify", "verify"), ("draft", "draft")):
        assert ratios[operation] == pytest.approx(slower[curve], rel=1e-6)
    assert ratios["prefill"] == pytest.approx(1.0)
    assert set(meter.drifted()) == {"greedy step", "verify"}  # 0.9 is inside the 10 % tolerance
    rescaled = rescaled_cost(profile.samples, {"verify": 1.2})
    sizes = np.array([1, 6, 40])
    assert np.allclose(rescaled.verify(sizes, 300), 1.2 * cost.verify(sizes, 300))
    assert np.allclose(rescaled.draft(sizes, 300), cost.draft(sizes, 300))


def test_validate_real_bad_input_is_one_line_and_writes_nothing(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    out = tmp_path / "run"
    exists = tmp_path / "exists"
    exists.mkdir()
    cases = [
        (("--profile", "calibration/h100-demo-analytic"), "ANALYTIC"),
        (("--profile", "calibration/cpu-demo", "--baselines", "eagle3,nope"), "unknown baseline 'nope'"),
        (("--profile", "calibration/cpu-demo", "--policies", str(tmp_path / "none")), "no policy at"),
        (("--profile", str(tmp_path / "nowhere")), "no profile at"),
        (("--profile", "calibration/cpu-demo", "--prompts", str(empty)), "empty"),
        (("--profile", "calibration/cpu-demo", "--baselines", "", "--policies", ""), "nothing to validate"),
        (("--profile", "calibration/cpu-demo", "--batch-size", "4"), "no curves at batch size 4"),
        (("--profile", "calibration/cpu-demo-T1", "--batch-size", "4"), "no curves at batch size 4"),
    ]
    for args, message in cases:
        result = cli("validate", "--real", *args, "--out", str(out))
        assert result.returncode == 2 and message in result.stderr, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert not out.exists()
    taken = cli("validate", "--real", "--profile", "calibration/cpu-demo", "--out", str(exists))
    assert taken.returncode == 2 and "exists" in taken.stderr
    both = cli("validate", "--real", "--simulated", "--profile", "calibration/cpu-demo")
    assert both.returncode == 2 and "choose one of" in both.stderr
    missing = cli("plot", "validation", "--report", str(tmp_path / "none"))
    assert missing.returncode == 2 and "no validation report" in missing.stderr


@pytest.mark.long(seconds=160)
@pytest.mark.model
@pytest.mark.e2e
def test_demo_runs_the_whole_loop_and_validates_for_real(tmp_path):
    """calibrate (quick) -> headroom -> train RADAR -> validate --real -> figures -> summary. The smoke preset:
    the loop's wiring is tested here, RADAR's learning in test_train.py."""
    out = tmp_path / "demo"
    result = simspec("demo", "--algos", "radar", "--preset", "smoke", "--n-prompts", "2", "--max-new-tokens", "10",
                     "--out", str(out), "--json")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "demo summary" in result.stderr and "demo finished" in result.stdout
    assert "over the set, no refit: mean |error|" in " ".join(result.stdout.split())  # the headline, no refit
    assert "an adaptive policy can add at most" in " ".join(result.stdout.split())  # headroom, before training
    assert "trained radar (smoke preset) in" in " ".join(result.stdout.split())  # the preset it ran
    from simspec.machine import cpu_model

    assert f"calibrated {cpu_model()}, cpu (" in " ".join(result.stdout.split())  # the CPU's model named
    assert (out / "headroom" / "headroom.png").stat().st_size > 10_000
    line = last_json(result)  # the run's summary, its validation as `validate --json` gives it
    assert line["root"] == str(out) and line["report"]["run"] == f"{out}/validate"
    assert {r["method"] for r in line["report"]["rows"]} >= {"radar"} and "actions" not in line["report"]["rows"][0]
    report = json.loads((out / "validate" / "report.json").read_text())
    assert report["schema"] == "simspec-validation" and report["n_prompts"] == 2 and report["inputs_hash"]
    assert report["profile"]["name"] == "profile" and report["policies"][0]["algo"] == "radar"
    # Calibrated with its engine fit: staleness stated, every predicted speedup with an interval.
    staleness = report["staleness"]
    assert staleness["engine_fit"] and staleness["same_device"] and staleness["age_hours"] < 1
    assert len(load_profile(out / "profile").meta.engine_fit["prompt_ids"]) == 2  # no more than it scores
    assert set(staleness["plain_live_over_profile"]) >= {"before", "start", "after"}
    assert report["intervals"]["rows"] == 4
    for row in report["rows"]:
        low, high = row["speedup_sim_set_interval"]
        assert low <= row["speedup_sim_set"] <= high and row["in_interval"] == (low <= row["speedup_real_set"] <= high)
    assert json.loads((out / "policies" / "radar" / "policy.json").read_text())["preset"] == "smoke"
    rows = {r["method"]: r for r in report["rows"]}
    assert len(rows) == 4 and "radar" in rows
    for row in rows.values():
        assert row["lossless"], row["divergences"]  # every output equals greedy decoding
        assert row["speedup_real"] > 0 and row["speedup_sim"] > 0
        # The recorded trees predict every real cycle: same count of cycles and draft calls.
        assert row["cycles"] == row["cycles_sim"] and row["draft_calls"] == row["draft_calls_sim"]
        # Shares of the method's wall time; the rest (resets between prompts) is a sliver.
        assert 0.97 < sum(row["time_shares"].values()) <= 1.0 + 1e-9
    for figure in ("sim-vs-real.png", "time-breakdown.png", "action-map-radar.png"):
        assert (out / "validate" / figure).stat().st_size > 10_000
    assert (out / "validate" / "report.md").read_text().startswith("# validate --real")
    assert (out / "figures" / "curves-profile.png").exists() and (out / "figures" / "training-radar.png").exists()
    redraw = cli("plot", "validation", "--report", str(out / "validate"), "--out", str(tmp_path / "again"),
                 "--method", "eagle3")
    assert redraw.returncode == 0, redraw.stderr
    assert (tmp_path / "again" / "action-map-eagle3.png").exists()
    again = cli("demo", "--out", str(out))
    assert again.returncode == 2 and "exists" in again.stderr


@pytest.mark.model
def test_validate_real_at_batch_2_scores_the_replayed_queue(tmp_path, tiny_profile):
    """Three prompts through two rows: traces recorded here for the same prompts, so the replayed
    queue runs the engine's cycles exactly; every output equals plain decoding's. On the tiny
    target's profile (conftest.py): the wiring, at a tenth of the demo pair's cost."""
    out = tmp_path / "run"
    result = cli("validate", "--real", "--profile", str(tiny_profile), "--batch-size", "2",
                 "--n-prompts", "3", "--max-new-tokens", "8", "--baselines", "eagle3,static:4,6",
                 "--recalibrate", "--recalibrate-prompts", "2", "--refit-ladder", "2:2,3:4,4:6",
                 "--threads", "1", "--repeats", "1", "--out", str(out), "--json")  # a core per worker; one pass
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["schema"] == "simspec-validation-batch" and report["batch_size"] == 2 and report["inputs_hash"]
    assert report["plain_cycles_real"] == report["plain_cycles_sim"]
    assert [r["method"].split("(")[0] for r in report["rows"]] == ["eagle3", "static"]
    for row in report["rows"]:
        assert row["exact_match"] and row["cycles_real"] == row["cycles_sim"]
        assert row["draft_calls_real"] == row["draft_calls_sim"] > 0  # every level of every cycle's deepest row
        assert row["speedup_real"] > 0 and row["speedup_sim"] > 0
    assert last_json(result)["mean_abs_rel_error"] == report["mean_abs_rel_error"]
    assert (out / "report.md").read_text().startswith("# validate --real at batch 2")
    # --recalibrate: the profile that predicted was refitted at batch 2 on train prompts, and saved
    assert report["profile"]["refit"] == "this run" and report["profile"]["refit_live_over_profile"]["verify"] > 0
    refitted = load_profile(out / "profile")
    assert refitted.meta.in_situ["batch_size"] == 2 and refitted.meta.in_situ["split"] == "train"
    n = len(refitted.meta.in_situ["trees"])  # plain decoding before every fourth tree and after the last
    assert n == 3 and refitted.meta.in_situ["plain_runs"] == n // 4 + 1 + (n % 4 > 0)
    assert refitted.meta.inputs_hash == report["profile"]["hash"]
    assert any(r["kind"] == "bookkeeping" and r.get("batch") == 2 for r in refitted.samples)
    # ... and a second refit ran between the scored runs (one run of its order after each), the
    # same queues predicted by it beside the first
    co = report["co_timed_refit"]
    assert co["refit"]["co_timed"] and co["refit"]["steps"] == 3 * report["repeats"]  # plain + 2 methods per pass
    assert [r["method"] for r in co["rows"]] == [r["method"] for r in report["rows"]]
    assert all(r["speedup_sim"] > 0 for r in co["rows"]) and co["max_abs_rel_error"] >= co["mean_abs_rel_error"]
    assert load_profile(out / "profile-cotimed").meta.in_situ["co_timed"]
    assert "co-timed" in (out / "report.md").read_text()



@pytest.mark.model
def test_validate_real_samples_at_batch_2_and_replays_each_passs_queue(tmp_path, tiny_profile_t1):
    """At T = 1 through two rows, two passes each sampling with its own seeds: the scored traces
    hold one sampled continuation per (pass, prompt), each pass's queue is replayed on its own
    traces (plain decoding's cycles match the engine's), and the outputs are judged by the KS test
    of their PIT under the target, not by equality. The tiny target's T = 1 profile (conftest.py)."""
    out = tmp_path / "run"
    result = cli("validate", "--real", "--profile", str(tiny_profile_t1), "--batch-size", "2",
                 "--n-prompts", "3", "--max-new-tokens", "8", "--baselines", "static:4,6", "--repeats", "2",
                 "--threads", "1", "--out", str(out), "--json")
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["temperature"] == 1 and report["seed"] == 0 and report["repeats"] == 2
    # a pass: 2 rows x 7 plain steps after the prefill's token, then the third prompt's 7
    assert report["plain_cycles_real"] == report["plain_cycles_sim"] == 14
    (row,) = report["rows"]
    assert row["exact_match"] is None and row["lossless"] and row["pit_p"] > 1e-3
    assert len(row["speedup_real_passes"]) == 2 and row["speedup_real"] == pytest.approx(
        np.mean(row["speedup_real_passes"]))
    assert 4 <= row["cycles_sim"] <= 14 and 4 <= row["cycles_real"] <= 14  # D = 4: up to 4 tokens a cycle
    # each pass's queue replayed on its own sampled traces; the noise floor from real / predicted per pass
    sim = row["speedup_sim_passes"]
    assert len(sim) == 2 and sim[0] != sim[1]
    ratios = np.divide(row["speedup_real_passes"], sim)
    assert report["measurement_noise"]["se"][row["method"]] == pytest.approx(
        np.std(ratios, ddof=1) / np.sqrt(2) / np.mean(ratios))
    assert "sampled at T = 1" in (out / "report.md").read_text()
    assert "an exact simulator would show" in (out / "report.md").read_text()

def test_a_profile_from_another_device_is_refused_or_warned(tmp_path):
    """Latencies describe the machine they were measured on: the device model must match."""
    from simspec.errors import SimspecError
    from simspec.machine import device_model
    from simspec.measure.insitu import check_device

    profile = load_profile(ROOT / "calibration" / "cpu-demo")
    profile.meta = profile.meta.with_(device_model=device_model("cpu"))
    assert check_device(profile, False, refit=False) is None
    profile.meta = profile.meta.with_(device_model="Imaginary CPU 9000")
    with pytest.raises(SimspecError, match="measured on Imaginary CPU 9000, and this is.*predictions would be off"):
        check_device(profile, False, refit=False)
    with pytest.raises(SimspecError, match="a refit would start from its curve shapes"):
        check_device(profile, False, refit=True)
    assert "Imaginary CPU 9000" in check_device(profile, True, refit=False)
    profile.meta = profile.meta.with_(device_model=None)  # a profile from before the field: cannot tell, says so
    assert "does not record the device" in check_device(profile, False, refit=False)
    here = device_model("cpu")
    if " (family " in here:  # a profile naming the brand only, from before the family/model numbers: a warning
        profile.meta = profile.meta.with_(device_model=here.split(" (family ")[0])
        assert "records only the CPU name" in check_device(profile, False, refit=False)
        other_generation = here.split(" (family ")[0] + " (family 1, model 2)"
        profile.meta = profile.meta.with_(device_model=other_generation)
        with pytest.raises(SimspecError, match="was measured on"):
            check_device(profile, False, refit=False)


@pytest.mark.long(seconds=15)
@pytest.mark.model
@pytest.mark.e2e
def test_validate_recalibrate_refits_on_train_prompts_and_predicts_with_the_refit(tmp_path, tiny_profile):
    """The tiny target's profile (conftest.py), in a process of its own as a user runs it."""
    out = tmp_path / "run"
    result = simspec("validate", "--real", "--profile", str(tiny_profile), "--recalibrate", "--refit-ladder",
                      "2:2,3:4,5:10", "--recalibrate-prompts", "1", "--n-prompts", "1", "--max-new-tokens", "6",
                      "--baselines", "grid", "--threads", "1",  # a core each
                      "--out", str(out), "--json")
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["profile"]["refit"] == "this run" and report["profile"]["path"] == str(tiny_profile)
    refit, base = load_profile(out / "profile"), load_profile(tiny_profile)
    situ = refit.meta.in_situ
    # Refitted on the train split of the scored set, never on a scored prompt.
    assert situ["prompts"] == "humaneval" and situ["split"] == "train" and len(situ["prompt_ids"]) == 1
    assert not set(situ["prompt_ids"]) & set(report["prompt_ids"])
    assert situ["base"]["inputs_hash"] == base.meta.inputs_hash
    assert report["profile"]["hash"] == refit.meta.inputs_hash
    assert refit.traces().content_hash() == base.traces().content_hash()  # the base's traces, found from RUN/profile
    key = lambda r: (r["kind"], r.get("batch", 1), r.get("rows"), r["n"], r["context"])  # noqa: E731
    before = {key(r): r for r in base.samples}
    assert set(before) <= {key(r) for r in refit.samples}
    for record in refit.samples:  # batch 1's scaled by their ratios; batch 2's as they were
        if "in_situ_scale" not in record:
            assert record["batch"] == 2 and record == before[key(record)]
            continue
        # a record, or where its curve is a fit (or the refit timed a size the grid lacks) the base's model there
        basis = (float(base.cost.curves[record["kind"]](record["n"], record["context"])) if record.get("projected")
                 else before[key(record)]["median"])
        assert record["median"] == pytest.approx(basis * record["in_situ_scale"])
    assert "refitted in situ in this run" in (out / "report.md").read_text()
    assert report["profile"]["refit_live_over_profile"] == situ["live_over_profile"]
    # The co-timed refit: one step after each scored prompt, on train prompts, its own profile saved.
    co = report["co_timed_refit"]
    assert co["refit"]["steps"] == report["n_prompts"] * report["repeats"] and co["refit"]["co_timed"]
    assert co["refit"]["prompt_ids"] == situ["prompt_ids"] and co["refit"]["cycles"] > 0
    assert [r["method"] for r in co["rows"]] == [r["method"] for r in report["rows"]]
    cotimed = load_profile(out / "profile-cotimed")
    assert cotimed.meta.in_situ["co_timed"] and cotimed.traces().content_hash() == base.traces().content_hash()
    assert co["mean_abs_rel_error"] == pytest.approx(np.mean([abs(r["rel_error"]) for r in co["rows"]]))
    assert "Co-timed refit" in (out / "report.md").read_text()
    # Over the set too, and that is the headline: the co-timed refit's throughput-ratio error first.
    assert co["over_the_set"]["mean_abs_rel_error"] == pytest.approx(np.mean([abs(r["rel_error_set"])
                                                                             for r in co["rows"]]))
    line = json.loads(result.stdout.strip().splitlines()[-1])
    assert [(f["prediction"], f["statistic"]) for f in line["fidelity"]] == [
        ("co-timed refit", "over the set"), ("upfront refit", "over the set"),
        ("co-timed refit", "median over prompts"), ("upfront refit", "median over prompts")]
    assert "**Simulator fidelity** (co-timed refit, over the set)" in (out / "report.md").read_text()
    # Every timed cycle kept: the ladder's (one static tree per --refit-ladder entry), the co-timed ones, the scored.
    with np.load(out / "cycles.npz") as cycles:
        assert list(cycles["phases"]) == ["refit", "co-timed", "scored"]
        phase, method = cycles["cycle_phase"], cycles["methods"][cycles["cycle_method"]]
        assert {m for m in method[phase == 0]} == {f"static(D={d},V={v})" for d, v in ((2, 2), (3, 4), (5, 10))}
        assert set(method[phase == 2]) == {r["method"] for r in report["rows"]}
        assert (phase == 1).sum() == co["refit"]["cycles"]
        # The co-timed ladder holds each scored method's most frequent (depth, V).
        shapes = np.stack([cycles["cycle_depth"], cycles["cycle_size"]], axis=1)
        for name in set(method[phase == 2]):
            points, counts = np.unique(shapes[(phase == 2) & (method == name)], axis=0, return_counts=True)
            assert list(points[counts.argmax()]) in co["refit"]["trees"], name
        # ... and times each of them on every step, as often as the methods run.
        runs = cycles["cycle_run"]
        for d, v in co["refit"]["targeted"]:
            at = (phase == 1) & (method == f"static(D={d},V={v})")
            assert len(np.unique(runs[at])) == co["refit"]["steps"], (d, v)
            assert set(cycles["cycle_slot"][at]) == set(range(co["refit"]["steps"])), (d, v)  # one run a step
        # Each run knows its slot: a scored run its (pass, prompt), a co-timed run its step.
        whole = cycles["methods"][cycles["run_method"]] == "greedy"
        for p in (1, 2):
            assert sorted(cycles["run_slot"][whole & (cycles["run_phase"] == p)]) == list(range(co["refit"]["steps"]))
        assert len(cycles["cycle_measured_verify"]) == len(phase) == len(cycles["cycle_predicted_verify"])
        assert set(cycles["step_phase"]) == {0, 1, 2}  # plain decoding interleaved in every phase


def test_residual_breakdown_splits_the_time_error_by_component():
    from simspec.measure.interleave import RunTiming
    from simspec.measure.residuals import cycle_table, residual_breakdown
    from simspec.report.markdown import render_residuals

    a = np.array
    spec = RunTiming("grid", 100, total_s=1.0, prefill_s=0.1, prefill_predicted_s=0.1,
                     measured={"draft": a([0.1, 0.1]), "verify": a([0.3, 0.3]), "policy": a([0.01, 0.01]),
                               "bookkeeping": a([0.02, 0.02])},
                     predicted={"draft": a([0.1, 0.1]), "verify": a([0.25, 0.2]), "bookkeeping": a([0.02, 0.02])},
                     cycles={"context": a([100, 300]), "size": a([6, 60]), "depth": a([4, 8]),
                             "committed": a([1, 3]), "accepted": a([2, 1])}, slot=3)
    greedy = RunTiming("greedy", 100, total_s=0.5, prefill_s=0.1, prefill_predicted_s=0.08,
                       measured={"greedy step": a([0.2, 0.2])}, predicted={"greedy step": a([0.2, 0.2])},
                       cycles={"context": a([100, 101])}, slot=4)
    out = residual_breakdown([spec, greedy], {"grid": 0.005})
    grid = out["methods"]["grid"]
    # verify: 0.45 predicted against 0.6 live; policy 0.01 against 0.02; 0.04 s outside the components
    assert grid["mispredicted_share"]["verify"] == pytest.approx(-0.15)
    assert grid["mispredicted_share"]["policy"] == pytest.approx(-0.01)
    assert grid["mispredicted_share"]["other"] == pytest.approx(-0.04)
    assert sum(grid["mispredicted_share"].values()) == pytest.approx(grid["time_error"]) == pytest.approx(-0.2)
    assert out["methods"]["greedy"]["mispredicted_share"]["prefill"] == pytest.approx(-0.04)
    by_size = {b["bin"]: b["live_over_predicted"] for b in out["curves"]["verify by verified size"]}
    assert by_size == {"6": pytest.approx(1.2), "33-64": pytest.approx(1.5)}
    by_depth = {b["bin"]: b["live_over_predicted"] for b in out["curves"]["verify by draft depth"]}
    assert by_depth == {"4": pytest.approx(1.2), "8": pytest.approx(1.5)}
    assert any("| grid |" in line for line in render_residuals(out))

    # The same cycles as flat columns, greedy steps apart, each row where its run put it.
    table = cycle_table({"scored": [spec, greedy]})
    assert table["methods"][table["cycle_method"]].tolist() == ["grid", "grid"] and list(table["cycle_size"]) == [6, 60]
    assert table["cycle_measured_verify"].tolist() == [0.3, 0.3]
    assert table["cycle_predicted_verify"].tolist() == [0.25, 0.2]
    assert table["step_context"].tolist() == [100, 101] and table["step_run"].tolist() == [1, 1]
    assert table["run_total"].tolist() == [1.0, 0.5] and table["run_prefill_predicted"].tolist() == [0.1, 0.08]
    assert table["cycle_slot"].tolist() == [3, 3] and table["step_slot"].tolist() == [4, 4]
    assert table["run_slot"].tolist() == [3, 4]


def test_measurement_noise_is_the_pass_to_pass_error_an_exact_model_would_still_show():
    """Each method's standard error comes from its passes' medians; an exact simulator's
    expected |error| against such runs is sqrt(2 / pi) times it (half-normal), and the max over
    methods grows with their number. One pass: no estimate."""
    from simspec.report.validation import measurement_noise

    rows = [{"method": f"m{i}", "repeat_medians": [1.0 - 0.03, 1.0, 1.0 + 0.03]} for i in range(12)]
    noise = measurement_noise(rows)
    se = 0.03 / np.sqrt(3)
    assert noise["se_median"] == pytest.approx(se)
    assert noise["exact_model_mean_abs_rel_error"] == pytest.approx(se * np.sqrt(2 / np.pi), rel=0.02)
    assert 1.8 * se < noise["exact_model_max_abs_rel_error"] < 2.2 * se  # E max |N| over 12 draws: 1.96 se
    quiet = measurement_noise([{"method": "a", "repeat_medians": [1.2, 1.2]},
                               {"method": "b", "repeat_medians": [0.9, 0.9]}])
    assert quiet["exact_model_max_abs_rel_error"] == 0.0
    assert measurement_noise([{"method": "a", "repeat_medians": [1.2]}]) is None


@pytest.mark.model
def test_load_live_serves_a_stream_on_the_engine_beside_its_replay(tmp_path, tiny_profile):
    """``load --live`` with four requests arriving at once through two rows: the engine serves
    them as the replay's queue, cycle for cycle (greedy traces of the same prompts), every output
    equals plain decoding's, and each row holds the real metrics beside the replay's errors. The
    tiny target's profile (conftest.py)."""
    from simspec.sim.evaluate import split_traces

    held = split_traces(load_profile(tiny_profile).traces(), "heldout")
    stream = tmp_path / "stream.csv"
    stream.write_text("arrival_s,prompt_id,output_tokens\n"
                      + "".join(f"0,{pid},8\n" for pid in held.meta.prompt_ids[:4]))
    result = cli("load", "--profile", str(tiny_profile), "--max-batch", "2", "--stream", str(stream),
                 "--baselines", "static:4,6", "--max-new-tokens", "8", "--live", "--json")
    assert result.returncode == 0, result.stderr[-3000:]
    s = last_json(result)
    assert s["live"] and [r["method"] for r in s["rows"]] == ["plain", "static(D=4,W=10,V=6)"]
    for row in s["rows"]:
        assert row["lossless"] is True and row["real"]["requests"] == 4
        assert row["real"]["cycles"] == row["cycles"]
        assert set(row["rel_error"]) == {"throughput_tokens_per_s", "tpot_p50_s", "tpot_p90_s", "ttft_p50_s"}
    assert "speculation_pays_real" in s["verdicts"][0] and s["refit"] is None
    # --recalibrate: the curves at two rows refitted on train prompts through the same rows first,
    # and the baselines tuned by the refit; --refit-each-stream: refitted again right before each
    # real run, whose replay that refit prices (the first refit's error kept beside it)
    refit = cli("load", "--profile", str(tiny_profile), "--max-batch", "2", "--stream", str(stream),
                "--baselines", "static:4,6", "--max-new-tokens", "6", "--live", "--recalibrate",
                "--recalibrate-prompts", "1", "--refit-ladder", "4:6", "--refit-each-stream", "--json")
    assert refit.returncode == 0, refit.stderr[-3000:]
    r = last_json(refit)
    assert len(r["refit"]["prompts"]) == 1 and not set(r["refit"]["prompts"]) & set(held.meta.prompt_ids)
    assert set(r["refit"]["live_over_profile"]) >= {"verify", "greedy step"}
    assert all(row["lossless"] is True for row in r["rows"])
    for row in r["rows"]:
        assert row["refit"]["prompts"] == r["refit"]["prompts"] and row["refit"] != r["refit"]  # a refit of its own
        assert set(row["rel_error_first_refit"]) == set(row["rel_error"])
        assert row["rel_error_first_refit"] != row["rel_error"]  # priced by its own refit, not the first
    assert "the same runs under the first refit" in " ".join(refit.stdout.split())
