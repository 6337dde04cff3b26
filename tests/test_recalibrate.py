"""`recalibrate`: the in-situ refit's arithmetic, and the verb end to end on the live demo pair."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import ROOT, last_json, simspec

from simspec.engine.records import CycleRecord, Generation
from simspec.errors import SimspecError
from simspec.measure.insitu import LADDER, QUICK_LADDER, CoTimedRefit, ladder_points
from simspec.measure.interleave import DriftMeter
from simspec.measure.refit import log_interp, refit_samples
from simspec.sim.profile import cost_model, load_profile


def zigzag_verify(samples: list[dict]) -> list[dict]:
    """The verify records of ``samples`` moved alternately 8 % up and down along V and L: a
    noisy calibration, which the cost model fits with a plane (its held-out error is
    half an interpolation's), so the model no longer passes through the samples."""
    out, seen = [], {}
    contexts = sorted({r["context"] for r in samples if r["kind"] == "verify"})
    for record in sorted(samples, key=lambda r: (r["kind"], r["context"], r["n"])):
        if record["kind"] == "verify" and record.get("batch", 1) == 1:
            i = seen[record["context"]] = seen.get(record["context"], -1) + 1
            f = 1.08 if (i + contexts.index(record["context"])) % 2 else 0.92  # a checkerboard over (V, L)
            record = {**record, "samples": [x * f for x in record["samples"]],
                      **{k: record[k] * f for k in ("median", "q25", "q75")}}
        out.append(record)
    return out


@pytest.mark.parametrize("noisy, verify_fit", [(False, "interp"), (True, "affine")])
def test_refit_scales_verify_per_size_and_the_rest_by_one_ratio(noisy, verify_fit):
    """Ratios are measured against the profile's model: the refit is that model times them,
    also where the model is a fit that does not pass through the samples (a noisy calibration,
    whose verification the cost model fits with a plane)."""
    samples = load_profile(ROOT / "calibration" / "cpu-demo").samples
    samples = zigzag_verify(samples) if noisy else samples
    cost = cost_model(samples)
    assert cost.report["verify"]["method"] == verify_fit
    verify_slower = {4: 1.3, 64: 1.1}
    greedy_slower, draft_slower, bookkeeping_slower = 1.2, 0.9, 2.0
    greedy = Generation(list(range(6)), 100, float(cost.prefill(100)), 1.0,
                        [CycleRecord(1, 1, 1, 0, 0, 0.0, float(cost.greedy(100 + i)) * greedy_slower, 0.0, 0.0)
                         for i in range(5)])
    meter = DriftMeter(cost, 10)
    meter.greedy(greedy)
    for size, slower in verify_slower.items():  # one cycle per size, accepting nothing, at context 100
        cycle = CycleRecord(3, 10, size, 0, 2, float(cost.draft(1, 100) + cost.draft(10, 100)) * draft_slower,
                            float(cost.verify(size, 100)) * slower, 0.0,
                            float(cost.bookkeeping(size, 3)) * bookkeeping_slower)
        meter.speculative(Generation([0], 100, 0.0, 1.0, [cycle]))
    refit_records, scales = refit_samples(samples, meter)
    refit = cost_model(refit_records)
    contexts = np.array([64, 300, 512])
    for size, expected in [(2, 1.3), (4, 1.3), (16, 1.2), (64, 1.1), (256, 1.1)]:  # linear in log V, flat ends
        assert np.allclose(refit.verify(size, contexts), expected * cost.verify(size, contexts), rtol=1e-9), size
    assert np.allclose(refit.greedy(contexts), greedy_slower * cost.greedy(contexts))
    assert np.allclose(refit.draft(np.array([1, 10]), 300), draft_slower * cost.draft(np.array([1, 10]), 300))
    assert np.allclose(refit.bookkeeping(np.array([4, 60]), 4),
                       bookkeeping_slower * cost.bookkeeping(np.array([4, 60]), 4))
    assert np.allclose(refit.prefill(200), cost.prefill(200))  # the greedy run's prefill took what the curve says
    assert scales["verify"] == {4: 1.3, 64: 1.1}
    assert scales["greedy"] == pytest.approx(1.2)


def plain_run(cost, prompt_length: int, steps: int, step_s) -> Generation:
    """Plain decoding of ``steps`` tokens, each step taking ``step_s(context)`` seconds."""
    cycles = [CycleRecord(1, 1, 1, 0, 0, 0.0, float(step_s(prompt_length + i)), 0.0, 0.0) for i in range(steps)]
    return Generation(list(range(steps)), prompt_length, float(cost.prefill(prompt_length)), 1.0, cycles)


def test_refit_follows_the_plain_step_along_the_context():
    """The demo profile's plain-step curve has a bump (58 ms at 128 tokens, 66 at 192, 60 at 256)
    that the live engine lacks. Live steps flat along the context, from train prompts at 100-299
    tokens: the refitted curve follows them at every context there, bump gone. One ratio for the
    whole curve, the refit before, is more than 4 % off somewhere in that range: prompts at one
    context priced another's."""
    # Its plain step interpolated through the measured points (where a fit would smooth the bump:
    # the held-out contexts rate a plane better on these points), as a refit's records are.
    samples = [{**r, "projected": True} if r["kind"] == "greedy" else r
               for r in load_profile(ROOT / "calibration" / "cpu-demo").samples]
    cost = cost_model(samples)
    grid = sorted({r["context"] for r in samples if r["kind"] == "greedy"})
    assert float(cost.greedy(192)) > 1.1 * float(cost.greedy(128))  # the bump this test is about
    live = 0.066  # seconds, at every context
    meter = DriftMeter(cost, 10)
    for _ in range(10):
        for prompt_length in range(100, 300, 10):
            meter.greedy(plain_run(cost, prompt_length, 10, lambda c: live))
    refit_records, scales = refit_samples(samples, meter)
    refit = cost_model(refit_records)
    contexts = np.arange(100, 300)
    assert np.allclose(refit.greedy(contexts), live, rtol=0.01)
    assert set(scales["greedy"]) == set(grid)
    one_ratio = meter.ratios()["greedy step"] * np.asarray(cost.greedy(contexts))
    assert np.abs(one_ratio / live - 1).max() > 0.04
    # The records are the model's values times each grid context's scale.
    for record in refit_records:
        if record["kind"] == "greedy":
            assert record["projected"] and record["median"] == pytest.approx(
                float(cost.greedy(record["context"])) * record["in_situ_scale"])
            assert record["in_situ_scale"] == pytest.approx(scales["greedy"][record["context"]], abs=1e-4)


def test_plain_step_scales_fit_a_curve_of_another_shape_and_hold_unreached_contexts_at_the_overall_ratio():
    """Live steps 20 % above the profile below 160 tokens and 5 % above beyond, with noise: the
    scales recover each side, and grid contexts no step reached stay at the overall ratio."""
    from simspec.measure.refit import context_ratios

    cost = cost_model(load_profile(ROOT / "calibration" / "cpu-demo").samples)
    grid = np.array([32, 64, 128, 192, 256, 384, 512, 768])
    contexts = np.repeat(np.arange(100, 260), 30)
    model = np.asarray(cost.greedy(contexts))
    truth = np.where(contexts < 160, 1.2, 1.05)
    live = model * truth * np.exp(np.random.default_rng(0).normal(0, 0.1, len(contexts)))
    keys, at = np.unique(contexts, return_inverse=True)
    sums = [np.bincount(at, weights=x) for x in (live, model, np.ones_like(model))]
    overall = live.sum() / model.sum()
    scales = context_ratios(grid, cost.greedy(grid), keys, *sums, overall=overall)
    fitted = np.interp(keys, grid, scales * cost.greedy(grid)) / cost.greedy(keys)
    # The step between 128 and 192 is not one the curve can take: judge away from it.
    for low, high, expected in ((100, 128, 1.2), (200, 256, 1.05)):
        inside = (keys >= low) & (keys < high)
        assert np.abs(fitted[inside] / expected - 1).max() < 0.03, (low, high)
    assert scales[0] == pytest.approx(overall, rel=1e-3) and scales[-1] == pytest.approx(overall, rel=1e-3)
    assert context_ratios(grid, cost.greedy(grid), keys[:1], live[:1] * 5, model[:1] * 5, np.array([5.0]),
                          overall) is None


def test_a_ladder_is_named_or_given_as_depth_size_pairs():
    assert ladder_points("full") == LADDER and ladder_points("quick") == QUICK_LADDER
    assert ladder_points("3:4,4:8") == ((3, 4), (4, 8))
    for bad in ("", "medium", "3:4,", "4", "1:1", "5:4", "3:x"):
        with pytest.raises(SimspecError, match="--refit-ladder takes full, quick or depth:size pairs"):
            ladder_points(bad)


def test_refit_follows_the_measured_ratio_at_every_ladder_size():
    """The verify scale passes through each ladder size's own ratio, so a size the live engine
    runs slower than its neighbours (V = 7 on the EPYC) is priced as measured, not smoothed
    into its neighbours; between sizes it is linear in log V, beyond them flat. The ladder
    holds every V up to 12, where tree policies spend most of their cycles."""
    sizes = np.array([4, 5, 6, 7, 8, 10, 16, 64])
    ratios = np.array([1.09, 1.18, 1.30, 1.51, 1.33, 1.25, 1.2, 1.1])
    scale = log_interp(sizes, ratios)
    for v, r in zip(sizes, ratios):
        assert scale(v) == pytest.approx(r)
    assert scale(32) == pytest.approx(1.15)  # halfway between 16 and 64 in log V
    assert scale(2) == pytest.approx(1.09) and scale(1000) == pytest.approx(1.1)
    assert {v for _, v in LADDER} >= set(range(2, 13))


def test_co_timed_ladder_adds_each_scored_methods_own_operating_point():
    """EAGLE-3's V = 60 lies between the ladder's 48 and 64, and live it verifies in V = 64's time:
    priced between them it came out 4 % cheap. The co-timed refit adds each scored run's most
    frequent (depth, V) to its ladder, once; a point the ladder has is not repeated, and only
    the runs' shapes are read."""
    co = CoTimedRefit(None, load_profile(ROOT / "calibration" / "cpu-demo"), [("train-0", [1, 2, 3])], 8)

    def run(*shapes):
        return Generation([0], 10, 0.0, 1.0,
                          [CycleRecord(d, 10, v, 1, d - 1, 0.01, 0.1, 0.0, 0.001) for d, v in shapes])

    co.target([run((8, 60), (8, 60), (7, 50)), run((4, 8)), run((3, 8), (3, 8), (2, 8)), Generation([0], 10, 0.0, 1.0)])
    assert co.points[len(LADDER):] == [(8, 60), (3, 8)] and (4, 8) in LADDER
    assert [t.name for t in co.ladder[len(LADDER):]] == ["static(D=8,V=60)", "static(D=3,V=8)"]
    assert all(t.width == 10 for t in co.ladder)
    co.target([run((8, 60)), run((3, 8))])
    assert len(co.ladder) == len(co.points) == len(LADDER) + 2
    assert co.result().record["targeted"] == [[8, 60], [3, 8]]


def test_co_timed_steps_time_every_targeted_point_and_rotate_the_ladder():
    """A method's own operating point is timed on every step (as often as the method runs: one
    tree's time on one prompt spreads by 15-20 % here, and 8 of 48 prompts priced EAGLE-3's V = 60
    7 % off); the ladder's other points share the rest of each step in rotation, each in turn."""
    co = CoTimedRefit(None, load_profile(ROOT / "calibration" / "cpu-demo"), [("train-0", [1, 2, 3])], 8)
    run = lambda d, v: Generation([0], 10, 0.0, 1.0, [CycleRecord(d, 10, v, 1, d - 1, 0.01, 0.1, 0.0, 0.001)])  # noqa: E731
    co.target([run(8, 60), run(3, 8)])
    names = [[t.name for t in co.trees(step)] for step in range(len(LADDER))]
    assert all(step[:2] == ["static(D=8,V=60)", "static(D=3,V=8)"] for step in names)
    assert all(len(step) == 2 + co.trees_per_step for step in names)
    rotated = [name for step in names for name in step[2:]]
    ladder = [t.name for t in co.ladder[:len(LADDER)]]
    assert sorted(rotated) == sorted(ladder * co.trees_per_step)  # each ladder point equally often
    assert rotated[:len(LADDER)] == ladder


def test_refit_prices_a_size_the_profile_never_measured_at_its_own_ratio():
    """A profile calibrated without V = 7 (the shipped one, less its V = 7 records); the ladder
    runs it. The refit must price V = 7 at the ratio measured there, not at the average of
    V = 6's and V = 8's."""
    base = load_profile(ROOT / "calibration" / "cpu-demo").samples
    samples = [s for s in base if not (s["kind"] == "verify" and s["n"] == 7)]
    assert len(samples) < len(base) and any(s["kind"] == "verify" and s["n"] == 6 for s in samples)
    cost = cost_model(samples)
    meter = DriftMeter(cost, 10)
    for size, slower in {6: 1.3, 7: 1.5, 8: 1.3}.items():
        cycle = CycleRecord(3, 10, size, 0, 2, float(cost.draft(1, 100) + cost.draft(10, 100)),
                            float(cost.verify(size, 100)) * slower, 0.0, float(cost.bookkeeping(size, 3)))
        meter.speculative(Generation([0], 100, 0.0, 1.0, [cycle]))
    samples, _ = refit_samples(samples, meter)
    refit = cost_model(samples)
    contexts = np.array([64, 300, 512])
    for size, expected in [(6, 1.3), (7, 1.5), (8, 1.3)]:
        assert np.allclose(refit.verify(size, contexts), expected * cost.verify(size, contexts), rtol=1e-9), size
    assert np.allclose(refit.verify(16, contexts), 1.3 * cost.verify(16, contexts))  # grid points stay as they were
    added = [s for s in samples if s.get("interpolated")]
    assert {(s["kind"], s["n"]) for s in added} == {("verify", 7), ("bookkeeping", 6), ("bookkeeping", 7)}


@pytest.mark.long(seconds=40)
@pytest.mark.model
@pytest.mark.e2e
def test_recalibrate_refits_the_profile_on_the_live_engine(tmp_path):
    out = tmp_path / "insitu"
    # The shipped profile is another machine's (the device check has tests of its own): refit it anyway.
    # One torch thread (the profile's two would fight the other test worker for its core).
    result = simspec("recalibrate", "--profile", "calibration/cpu-demo", "--n-prompts", "1", "--max-new-tokens", "8",
                      "--out", str(out), "--allow-other-device", "--threads", "1", "--refit-ladder", "2:2,4:8",
                      "--json")
    assert result.returncode == 0, result.stderr[-3000:]
    summary = last_json(result)
    refit, base = load_profile(out), load_profile(ROOT / "calibration" / "cpu-demo")
    situ = refit.meta.in_situ
    assert situ["base"]["inputs_hash"] == base.meta.inputs_hash and situ["split"] == "train"
    assert situ["trees"] == [[2, 2], [4, 8]]  # --refit-ladder 2:2,4:8: two trees, a third of the quick ladder's time
    assert summary["inputs_hash"] == refit.meta.inputs_hash != base.meta.inputs_hash
    assert situ["cycles"] > 0 and set(situ["live_over_profile"]) >= {"greedy step", "verify", "draft"}
    assert refit.traces().content_hash() == base.traces().content_hash()  # the base's traces, found from here
    for record, before in zip(refit.samples, base.samples):
        assert record["median"] == pytest.approx(before["median"] * record["in_situ_scale"])
    # Sane, not tight: the other test worker may slow small ops several-fold; a unit slip would be 1000x.
    assert all(0.1 < r["in_situ_scale"] < 10 for r in refit.samples if r["kind"] != "bookkeeping")
    taken = simspec("recalibrate", "--profile", "calibration/cpu-demo", "--out", str(out))
    assert taken.returncode == 2 and "exists" in taken.stderr
    analytic = simspec("recalibrate", "--profile", "calibration/h100-demo-analytic", "--out", str(tmp_path / "x"))
    assert analytic.returncode == 2 and "ANALYTIC" in analytic.stderr and len(analytic.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


def test_a_refit_at_batch_4_scales_that_batch_s_curves_and_keeps_the_others():
    """Live batched cycles slower than the profile's curves at batch 4 by known ratios (verify per
    largest tree, bookkeeping, drafting and the plain step by one each): the refit at batch 4
    prices batch 4 at exactly those ratios times its model, its bookkeeping included (held at
    batch 4 now, not batch 1's times 4), and leaves batch 1's and batch 2's curves as they were."""
    from simspec.engine.records import BatchCycle, BatchRun
    from simspec.sim.replay import cycle_costs

    samples = load_profile(ROOT / "calibration" / "cpu-demo-batch").samples
    cost = cost_model(samples)
    four = cost.at_batch(4)
    verify_slower = {4: 1.3, 16: 1.2, 64: 1.1}
    greedy_slower, draft_slower, bookkeeping_slower = 1.15, 0.9, 2.0
    rows = np.ones(4, dtype=np.int64)
    plain = [BatchCycle(rows, rows, c, 1, 0.0, float(four.greedy(c)) * greedy_slower, 0.0, 0.0) for c in range(80, 300)]
    cycles = []
    for size, slower in verify_slower.items():
        depth, sizes = np.full(4, 4), np.full(4, size)
        draft, verify, book = (float(x[0]) for x in cycle_costs(four, 10, depth, sizes, np.zeros(1, int),
                                                                np.array([200]), np.array([2])))
        cycles.append(BatchCycle(depth, sizes, 200, 2, draft * draft_slower, verify * slower, 0.0,
                                 book * bookkeeping_slower))
    meter = DriftMeter(four, 10)
    meter.batch(BatchRun([], 4, 1.0, len(plain), batch_cycles=plain), plain=True)
    meter.batch(BatchRun([], 4, 1.0, len(cycles), batch_cycles=cycles), plain=False)
    records, scales = refit_samples(samples, meter, 4)
    refit = cost_model(records)
    after = refit.at_batch(4)
    contexts = np.array([64, 200, 320])
    for size, expected in [(2, 1.3), (4, 1.3), (8, 1.25), (16, 1.2), (32, 1.15), (64, 1.1)]:  # linear in log V
        assert np.allclose(after.verify(size, contexts), expected * four.verify(size, contexts), rtol=1e-9), size
    assert np.allclose(after.greedy(contexts), greedy_slower * four.greedy(contexts), rtol=1e-3)
    assert np.allclose(after.draft(np.array([1, 10]), 200), draft_slower * four.draft(np.array([1, 10]), 200))
    assert np.allclose(after.bookkeeping(np.array([4, 16, 64]), 4),
                       bookkeeping_slower * four.bookkeeping(np.array([4, 16, 64]), 4))
    assert scales["verify"] == verify_slower
    sizes = np.array([1, 6, 40])
    for batch in (1, 2):  # other batch sizes' curves, bookkeeping included, as calibrated
        was, now = cost.at_batch(batch), refit.at_batch(batch)
        assert np.allclose(now.verify(sizes, contexts[:, None]), was.verify(sizes, contexts[:, None]))
        assert np.allclose(now.bookkeeping(sizes, 4), was.bookkeeping(sizes, 4))
        assert np.allclose(now.greedy(contexts), was.greedy(contexts))


def _timing(slot: int, method: str, ratio: float, size: int = 8):
    """A RunTiming whose every operation ran ``ratio`` times its prediction."""
    from simspec.measure.interleave import RunTiming

    if method == "greedy":
        predicted = {"greedy step": np.full(120, 0.02)}
        cycles = {"context": 100 + np.arange(120)}
    else:
        predicted = {"verify": np.full(5, 0.03), "draft": np.array([0.0, 0.01, 0.01, 0.01, 0.01]),
                     "bookkeeping": np.full(5, 0.001)}
        cycles = {"context": 100 + 4 * np.arange(5), "size": np.full(5, size), "depth": np.array([1, 4, 4, 4, 4])}
    measured = {k: v * ratio for k, v in predicted.items()}
    return RunTiming(method, 100, 1.0, 0.1 * ratio, 0.1, measured, predicted, cycles, slot)


SAMPLES = [r for r in load_profile(ROOT / "calibration" / "cpu-demo").samples if r.get("batch", 1) == 1]


def _meter(runs):
    meter = DriftMeter(cost_model(SAMPLES), 10)
    for run in runs:
        meter.add_timing(run)
    return meter


def test_a_refits_spread_comes_from_its_prompts_and_is_zero_when_they_agree():
    """The bootstrap over a refit's prompts: prompts that disagree on an operation's ratio give it a
    spread (and replicates around 1), prompts that agree give none; a replicate's factors price
    a profile's records by size."""
    from simspec.measure.refit import bootstrap_spread, replicate_samples

    agree = [_timing(s, m, 1.2, v) for s in range(4) for m in ("greedy", "static") for v in (4, 8)]
    flat = bootstrap_spread(_meter(agree), SAMPLES)
    assert set(flat["spread"]) == {"greedy", "verify", "draft", "bookkeeping", "prefill"}
    assert all(v == pytest.approx(0, abs=1e-9) for v in flat["spread"].values()), flat["spread"]
    differ = [_timing(s, "greedy", 1.0 + 0.1 * s) for s in range(4)] + [_timing(s, "static", 1.0, v)
                                                                        for s in range(4) for v in (4, 8)]
    spread = bootstrap_spread(_meter(differ), SAMPLES)
    assert spread["spread"]["greedy"] > 0.02 and spread["spread"]["verify"] == pytest.approx(0, abs=1e-9)
    factors = [np.mean(list(r["greedy"].values())) if isinstance(r["greedy"], dict) else r["greedy"]
               for r in spread["replicates"]]
    assert min(factors) < 1 < max(factors) and np.mean(factors) == pytest.approx(1, abs=0.03)
    assert bootstrap_spread(_meter(differ[:1]), SAMPLES)["replicates"] == []  # one prompt: nothing to resample
    scaled = replicate_samples(SAMPLES, {"verify": {"4": 1.0, "8": 2.0}, "draft": 1.5})
    for before, after in zip(SAMPLES, scaled):
        want = {"draft": 1.5, "verify": 1.0 if before["n"] <= 4 else 2.0 if before["n"] >= 8 else None}.get(
            before["kind"], 1.0)
        if want is not None:
            assert after["median"] == pytest.approx(before["median"] * want)


def test_plain_decodings_drift_is_read_in_thirds_of_the_runs():
    from simspec.measure.staleness import thirds

    runs = [_timing(s, "greedy", 1.0 + 0.05 * (s // 3)) for s in range(9)] + [_timing(0, "static", 3.0)]
    assert thirds(runs) == {"start": 1.0, "middle": 1.05, "end": 1.1}


def test_a_real_speedup_outside_its_predicted_interval_is_counted_out():
    from simspec.measure.staleness import add_intervals

    report = {"rows": [{"method": "a", "speedup_real_set": 1.30}, {"method": "b", "speedup_real_set": 1.10}]}
    add_intervals(report, {"a": {"profile": [1.26, 1.31], "with_drift": [1.25, 1.33]},
                           "b": {"profile": [1.15, 1.20], "with_drift": [1.14, 1.21]}})
    assert [r["in_interval"] for r in report["rows"]] == [True, False]
    assert report["intervals"]["coverage"] == 0.5
    bare = {"rows": [{"method": "a", "speedup_real_set": 1.3}]}
    add_intervals(bare, {})  # a profile without a spread: no interval, no coverage claimed
    assert "intervals" not in bare and "in_interval" not in bare["rows"][0]
