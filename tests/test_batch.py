"""Batch size in the cost model: curves at batch B price a cycle shared by B sequences
(``CostModel.at_batch``), the roofline models a batch, and ``tune --batch-size`` answers with
them. numpy only, but for the measured batched forward (model)."""

from __future__ import annotations

import pytest
from helpers import cli, last_json, simspec, synthetic_profile, tagged_traces

from simspec.errors import SimspecError
from simspec.sim.analytic import LLAMA31_8B, device_spec, forward_seconds
from simspec.sim.costmodel import CostModel, Point
from simspec.sim.profile import sample_record


def verify_s(n, c, batch):
    """A GPU-like verify curve: flat up to a knee that comes sooner as the batch grows."""
    knee = 64 // batch
    return 0.02 + 1e-6 * c + 2e-4 * max(0, n - knee) * batch


def samples():
    out = []
    for batch in (1, 8):
        out += [sample_record("verify", n, c, [verify_s(n, c, batch)] * 3, batch) for c in (32, 512)
                for n in (1, 2, 4, 8, 16, 32, 64, 128)]
        out += [sample_record("draft", n, c, [0.002 + 1e-5 * n * batch] * 3, batch) for c in (32, 512)
                for n in (1, 2, 4)]
        out += [sample_record("greedy", 1, c, [verify_s(1, c, batch)] * 3, batch) for c in (32, 512)]
    out += [sample_record("bookkeeping", n, d, [1e-4] * 3) for n in (1, 16, 128) for d in (2, 6)]
    return out


def points():
    return [Point(s["kind"], s["n"], s["context"], s["median"], s.get("batch", 1)) for s in samples()]


def test_at_batch_prices_with_that_batch_s_curves():
    cost = CostModel(points())
    assert cost.batch_sizes == [1, 8]
    eight = cost.at_batch(8)
    assert float(eight.verify(64, 32)) == pytest.approx(verify_s(64, 32, 8), rel=1e-6)
    assert float(cost.verify(64, 32)) == pytest.approx(verify_s(64, 32, 1), rel=1e-6)
    assert float(eight.bookkeeping(16, 2)) == pytest.approx(8 * float(cost.bookkeeping(16, 2)))
    assert cost.at_batch(1) is cost
    with pytest.raises(SimspecError, match="no curves at batch size 4"):
        cost.at_batch(4)


def test_the_roofline_verifies_more_tokens_cheaply_at_batch_1_than_at_batch_32():
    h100 = device_spec("h100")
    ratio = [forward_seconds(h100, LLAMA31_8B, 32, 1024, b) / forward_seconds(h100, LLAMA31_8B, 1, 1024, b)
             for b in (1, 32)]
    assert ratio[0] < 1.3 < ratio[1]  # memory-bound at one sequence, compute-bound at 32


@pytest.fixture(scope="module")
def profile_dir(tmp_path_factory):
    return synthetic_profile(tmp_path_factory.mktemp("batch"), tagged_traces(9), samples=samples())


@pytest.mark.e2e
def test_tune_verifies_no_more_at_batch_8_than_at_batch_1(profile_dir):
    one = simspec("tune", "--profile", profile_dir, "--json")
    eight = simspec("tune", "--profile", profile_dir, "--batch-size", "8", "--json")
    assert one.returncode == 0 and eight.returncode == 0, one.stderr + eight.stderr
    s1, s8 = last_json(one), last_json(eight)
    assert s8["batch_size"] == 8 and s8["size"] <= s1["size"]
    assert s8["size"] < s1["size"]  # the knee moved from 64 to 8 tokens: the tree must shrink
    missing = simspec("tune", "--profile", profile_dir, "--batch-size", "4")
    assert missing.returncode == 2 and "no curves at batch size 4" in missing.stderr


def test_tune_answers_each_batch_size_in_the_engines_per_batch_formats(profile_dir):
    """--batch-sizes 1,8: per batch size the best tree and chain (each as --batch-size B tunes
    it); vLLM's inclusive ranges from 1 with K = steps of each size's best chain; SGLang's
    adaptive bands with each size's best and runner-up chain steps, starting from batch 1's."""
    from simspec.sim.tune import TuneRequest, run

    vllm = run(TuneRequest(profile=str(profile_dir), engine="vllm", batch_sizes=(1, 8))).summary
    rows = vllm["per_batch"]
    for row in rows:
        alone = run(TuneRequest(profile=str(profile_dir), engine="vllm", batch_size=row["batch_size"])).summary
        assert (row["chain"]["depth"], row["chain"]["speedup"]) == (alone["depth"], pytest.approx(alone["speedup"]))
        tree = run(TuneRequest(profile=str(profile_dir), batch_size=row["batch_size"])).summary
        assert (row["tree"]["depth"], row["tree"]["size"]) == (tree["depth"], tree["size"])
    assert rows[1]["tree"]["size"] < rows[0]["tree"]["size"]  # the knee moved: the tree shrinks
    k1, k8 = (r["chain"]["depth"] - 1 for r in rows)
    config = vllm["per_batch_config"]["speculative_config"]
    assert config["num_speculative_tokens_per_batch_size"] == [[1, 7, k1], [8, 8, k8]]
    assert config["num_speculative_tokens"] == max(k1, k8, 1) and config["method"] == "eagle3"
    sglang = run(TuneRequest(profile=str(profile_dir), engine="sglang", batch_sizes=(1, 8))).summary
    adaptive = sglang["per_batch_config"]["adaptive_config"]
    assert list(adaptive) == ["1", "8"]
    for key, row in zip(adaptive, sglang["per_batch"]):
        assert row["chain"]["depth"] - 1 in adaptive[key]["candidate_steps"]
        assert row["chain"]["runner_up"]["depth"] - 1 in adaptive[key]["candidate_steps"]
    trtllm = run(TuneRequest(profile=str(profile_dir), engine="trtllm", batch_sizes=(1, 8))).summary
    config = trtllm["per_batch_config"]["speculative_config"]
    assert config["draft_len_schedule"] == {"1": k1, "8": k8} and config["max_draft_len"] == max(k1, k8, 1)
    assert any("max-concurrency" in note for note in run(TuneRequest(
        profile=str(profile_dir), engine="trtllm", batch_sizes=(1, 8))).notes)
    assert f"--speculative-num-steps {k1} " in sglang["per_batch_config"]["flags"]
    assert "--speculative-eagle-topk 1 " in sglang["per_batch_config"]["flags"]
    for bad, why in (((8,), "include 1"), ((1, 4), "no curves at batch size 4")):
        with pytest.raises(SimspecError, match=why):
            run(TuneRequest(profile=str(profile_dir), engine="vllm", batch_sizes=bad))


def test_batch_sizes_must_include_1():
    result = cli("calibrate", "--gpu", "h100", "--batch-sizes", "2,4", "--traces-from",
                     "calibration/traces-humaneval-eagle", "--out", "/tmp/simspec-never-written")
    assert result.returncode == 2 and "--batch-sizes takes batch sizes in 1..256 and includes 1" in result.stderr


@pytest.mark.model
def test_a_batched_forward_is_measured_per_batch(target):
    from simspec.measure.profiler import target_latency

    two = target_latency(target, [1, 4], [16], 1, batch=2)
    assert [(r.kind, r.tokens, r.context) for r in two] == [("verify", 1, 16), ("verify", 4, 16)]
    assert all(s > 0 for r in two for s in r.samples)


@pytest.mark.model
def test_batched_curves_are_timed_in_rounds_so_drift_falls_on_each_point_alike(target, random_drafter, monkeypatch):
    """A machine that slows down halfway through (a fake clock whose tick doubles after the third
    of six rounds) moves every batched point's median alike, verify and draft: timed block by block,
    the later points alone would absorb it and a curve would gain a slope no forward has."""
    from simspec.measure import profiler

    calls = []

    def clock(device):
        calls.append(None)
        return float(len(calls)) + max(0, len(calls) - switch)  # one per call, then two

    monkeypatch.setattr(profiler, "clock", clock)
    switch = 3 * 2 * 4  # three rounds of four points, two clock calls each
    verify = profiler.target_latency(target, [1, 2], [8, 16], 6, batch=2)
    assert len(calls) == 6 * 2 * 4 and {r.median for r in verify} == {1.5}
    calls.clear()
    switch = 3 * 2 * 8  # draft: eight points (widths 1, 2 x contexts 8, 16 x rows drafting 1, 2)
    draft = profiler.batched_draft_latency(random_drafter, target.model.config.vocab_size, 2, [1, 2], [8, 16], 6,
                                           target.device, active=[1])
    assert len(draft) == 8 and len(calls) == 6 * 2 * 8 and {r.median for _, r in draft} == {1.5}
