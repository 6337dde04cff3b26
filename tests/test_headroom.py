"""``simspec headroom``: on a profile's held-out traces, the hindsight oracle, the information
bound, the best static tree, the seeds' rules and learned policies, per batch size, and the
verdict (the bound over the best static tree). numpy only."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import cli, last_json, synthetic_profile, tagged_traces

from simspec.errors import SimspecError
from simspec.sim.headroom import HeadroomRequest, run


def _quiet(text):
    from contextlib import nullcontext

    return nullcontext()


def _bar(description, total):
    return lambda n=1, description=None: None


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    return synthetic_profile(tmp_path_factory.mktemp("headroom"), tagged_traces(4, n_prompts=12))


def test_headroom_reports_the_bound_it_computes_over_the_grid_best(profile):
    from simspec.sim.bound import information_bound
    from simspec.sim.evaluate import split_traces
    from simspec.sim.labels import WHOLE_TREE, fit_node_predictor
    from simspec.sim.profile import load_profile

    s = run(HeadroomRequest(profile=profile, baselines=("fsm", "ddd")), _bar, _quiet)
    (batch,) = s["batches"]
    rows = {r["kind"] + ":" + r["method"].split("(")[0]: r for r in batch["rows"]}
    assert set(rows) == {"oracle:oracle ", "bound:information bound ", "static:grid-best", "rule:fsm", "rule:ddd"}
    assert rows["oracle:oracle "]["share_of_oracle"] == 1.0
    loaded = load_profile(profile)
    traces = loaded.traces()
    train, held = split_traces(traces, "train"), split_traces(traces, "heldout")
    bound = information_bound(held, loaded.cost, fit_node_predictor(train, WHOLE_TREE))
    assert rows["bound:information bound "]["speedup"] == pytest.approx(float(np.median(bound.speedup)), rel=1e-12)
    verdict = batch["verdict"]
    assert verdict["over_best_static"] == pytest.approx(rows["bound:information bound "]["speedup"]
                                                        / rows["static:grid-best"]["speedup"] - 1)
    assert [r["speedup"] for r in batch["rows"]] == sorted((r["speedup"] for r in batch["rows"]), reverse=True)


def test_headroom_per_batch_size_on_sampled_traces_has_no_bound_and_says_why(tmp_path):
    """The shipped T = 1 batch profile: the oracle and the rules at batch 1 and 4, no bound (it
    reads the greedy path), a note saying so; --out writes the summary and the figure."""
    result = cli("headroom", "--profile", "calibration/cpu-demo-T1-batch", "--batch-sizes", "1,4", "--baselines",
                 "fsm", "--max-new-tokens", "24", "--out", tmp_path / "h", "--json")
    assert result.returncode == 0, result.stderr
    s = last_json(result)
    assert [b["batch_size"] for b in s["batches"]] == [1, 4]
    assert all(r["kind"] != "bound" for b in s["batches"] for r in b["rows"])
    assert "reads the greedy path" in result.stderr and "the hindsight oracle, which no policy reaches" in result.stdout
    assert json.loads((tmp_path / "h" / "headroom.json").read_text())["batches"] == s["batches"]
    assert (tmp_path / "h" / "headroom.png").stat().st_size > 10_000
    again = cli("headroom", "--profile", "calibration/cpu-demo-T1-batch", "--out", tmp_path / "h")
    assert again.returncode == 2 and "exists" in again.stderr


def test_headroom_refuses_a_batch_size_without_curves():
    with pytest.raises(SimspecError, match="no curves at batch size 4"):
        run(HeadroomRequest(profile="calibration/cpu-demo", batch_sizes=(1, 4)), _bar, _quiet)
