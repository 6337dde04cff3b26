"""The shipped T = 1 profile end to end: the simulator scores and benchmarks it at T = 1
(no model), and ``validate --real --temperature 1`` samples with shared seeds, records its
prediction's traces with the same seeds, and reports means, tau real vs simulated and the
PIT verdict (on the tiny target's T = 1 profile: the wiring, not the demo pair's numbers)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import ROOT, cli, last_json, simspec

from simspec.sim.profile import load_profile
from simspec.sim.trace_files import load_traces

T1 = "calibration/cpu-demo-T1"


def test_the_shipped_t1_profile_replays_at_t1_and_refuses_another_temperature():
    profile = load_profile(ROOT / T1)
    assert profile.temperature == 1.0 and profile.traces().sampled and profile.traces().nodes == 64
    bench = cli("bench-sim", "--profile", T1, "--temperature", "1", "--copies", "1", "--repeats", "1",
                "--depth", "5", "--size", "8", "--json")
    assert bench.returncode == 0, bench.stderr[-2000:]
    s = last_json(bench)
    assert s["temperature"] == 1.0 and s["cycles"] > 0 and s["cycles_per_s"] > 0
    scored = cli("validate", "--simulated", "--profile", T1, "--temperature", "1", "--baselines", "eagle3,grid",
                 "--json")
    assert scored.returncode == 0, scored.stderr[-2000:]
    rows = {r["method"].split("(")[0]: r for r in last_json(scored)["rows"]}
    assert last_json(scored)["temperature"] == 1.0
    assert 1.0 < rows["eagle3"]["tau"] < 12 and rows["grid-best"]["speedup"] > 0
    refused = cli("validate", "--real", "--profile", T1, "--temperature", "0")
    assert refused.returncode == 2 and "recorded at temperature 1, not 0" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


@pytest.mark.model
@pytest.mark.e2e
def test_validate_real_at_t1_pairs_seeds_and_predicts_each_seeds_continuation(tmp_path, tiny_profile_t1):
    """The tiny target's T = 1 profile (conftest.py), in a process of its own as a user runs it."""
    out = tmp_path / "run"
    result = simspec("validate", "--real", "--profile", str(tiny_profile_t1), "--temperature", "1", "--seed", "5",
                     "--n-prompts", "2", "--max-new-tokens", "6", "--repeats", "2", "--baselines", "grid,eagle3",
                     "--threads", "1", "--out", str(out), "--json")  # a core per worker
    assert result.returncode == 0, result.stderr[-3000:]
    line = last_json(result)
    assert line["temperature"] == 1.0
    report = json.loads((out / "report.json").read_text())
    assert (report["temperature"], report["top_p"], report["seed"], report["repeats"]) == (1.0, 1.0, 5, 2)
    assert len(line["rows"]) == len(report["rows"]) == 2  # grid best and EAGLE-3
    for row in line["rows"]:
        assert row["tau_real"] >= 1.0 and row["tau_sim"] >= 1.0 and row["pit_p"] is not None
        assert isinstance(row["lossless"], bool) and row["speedup_real_ci95"][0] <= row["speedup_real"]
    for row in report["rows"]:
        assert row["statistic"] == "mean" and len(row["per_seed"]["speedup_real"]) == 4  # 2 prompts x 2 seeds
        assert len(row["per_prompt"]["speedup_real"]) == 2
        assert row["speedup_real"] == pytest.approx(np.mean(row["per_seed"]["speedup_real"]))
        assert row["pit_tokens"] >= 4 * 5  # every token of every sampled output was transformed
    assert "95 % CI" in (out / "report.md").read_text()


@pytest.mark.model
@pytest.mark.e2e
def test_calibrate_records_sampled_traces_that_replay(tmp_path, tiny_target_dir):
    """On the tiny random target with the demo target's tokenizer, its first two layers drafting."""
    out = tmp_path / "traces"
    result = simspec("calibrate", "--traces-only", "--target", str(tiny_target_dir), "--draft", "target-layers:2",
                     "--temperature", "1", "--seed", "3", "--n-prompts", "1",
                     "--max-new-tokens", "5", "--depth-max", "4", "--width", "3", "--nodes", "6", "--out", str(out),
                     "--json")
    assert result.returncode == 0, result.stderr[-3000:]
    traces = load_traces(out)
    assert traces.sampled and traces.meta.seed == 3 and traces.nodes == 6 and traces.positions == 4
    # at most 6 nodes per depth bound, the root first with probability slot 0, every other in (0, 1]
    real = traces.node_depth < 4
    assert real[:, 0].all() and (traces.node_prob[real][1:] > 0).any()
    assert np.all(traces.node_prob[real] <= 1) and np.all(traces.node_parent[:, 0] == -1)
    dist = traces.accepted_distribution(np.arange(4), np.full(4, 4), np.full(4, 6))
    assert np.allclose(dist.sum(1), 1.0) and np.all(dist >= -1e-6)
