"""`simspec tune`: the best static tree of a profile, checked against the simulator's own grid,
and printed in each engine's conventions. numpy only."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import last_json, simspec, synthetic_profile, tagged_traces

from simspec.errors import SimspecError
from simspec.policies.base import tree_capacities
from simspec.sim.evaluate import split_traces, static_surface
from simspec.sim.profile import load_profile
from simspec.sim.tune import Tree, TuneRequest, run


@pytest.fixture(scope="module")
def profile_dir(tmp_path_factory):
    return synthetic_profile(tmp_path_factory.mktemp("tune"), tagged_traces(5))


def test_each_engine_gets_its_own_counting():
    tree = Tree(depth=5, width=10, size=16)  # 5 levels with the root: 4 draft steps
    sglang = tree.settings("sglang", "head")
    assert (sglang["speculative-num-steps"], sglang["speculative-eagle-topk"],
            sglang["speculative-num-draft-tokens"]) == (4, 10, 16)
    assert tree.settings("eagle", "head") == {"ea_model_path": "head", "total_token": 16, "depth": 3, "top_k": 10}
    assert tree.settings("vllm", "head")["num_speculative_tokens"] == 4
    assert tree.flags("sglang", "head").startswith("--speculative-algorithm EAGLE3 ")
    assert '"num_speculative_tokens": 4' in tree.flags("vllm", "head")
    assert tree.settings("trtllm", "head") == {"decoding_type": "Eagle3", "speculative_model": "head",
                                               "max_draft_len": 4}
    assert tree.flags("trtllm", "head").startswith('{"speculative_config": {"decoding_type": "Eagle3"')


def test_tune_picks_the_grid_best_of_the_train_prompts_and_scores_it_held_out(profile_dir):
    tuned = run(TuneRequest(profile=profile_dir, engine="sglang"))
    s = tuned.summary
    profile = load_profile(profile_dir)
    traces = profile.traces()
    surface = static_surface(split_traces(traces, "train"), profile.cost, None)
    means = {}
    for (d, v), result in surface.items():
        means.setdefault((d, int(min(v, tree_capacities(d, traces.width)))), float(np.mean(result.speedup)))
    best = max(means.values())
    assert means[(s["depth"], s["size"])] == pytest.approx(best)
    assert s["speedup_train"] == pytest.approx(best)
    assert s["runner_up"]["speedup_train"] <= best
    assert s["margin_train"] >= 0 and s["prompts"] == {"train": 4, "heldout": 3}
    assert s["flags"] == (f"--speculative-algorithm EAGLE3 --speculative-draft-model-path d --speculative-num-steps "
                          f"{s['depth'] - 1} --speculative-eagle-topk 2 --speculative-num-draft-tokens {s['size']}")


def test_a_chain_engine_is_tuned_over_chains(profile_dir):
    s = run(TuneRequest(profile=profile_dir, engine="vllm")).summary
    assert s["size"] == s["depth"] and s["runner_up"]["size"] == s["runner_up"]["depth"]
    assert s["settings"]["num_speculative_tokens"] == s["depth"] - 1


@pytest.mark.e2e
def test_tune_on_the_shipped_profile_prints_sglang_flags():
    result = simspec("tune", "--profile", "calibration/cpu-demo", "--engine", "sglang", "--json")
    assert result.returncode == 0, result.stderr
    s = last_json(result)
    assert {"depth", "width", "size", "speedup", "flags"} <= set(s)
    assert f"--speculative-num-steps {s['depth'] - 1}" in s["flags"]
    assert f"--speculative-num-draft-tokens {s['size']}" in s["flags"]
    assert s["speedup"] > 1 and s["width"] == 10


def test_tune_for_a_load_switches_speculation_off_where_the_batch_fills():
    """--rate: each batch band's draft length searched for goodput under a stream (on train
    prompts), then served on held-out ones. On the shipped batch profile at 1 request/s through
    8 rows (150 ms per token), drafting past 1 row costs more than it buys: the search turns
    it off there (throughput tuning alone drafts 1), never serves its train stream worse than
    where it started, and the engine's settings carry the tuned lengths."""
    from simspec.sim.load import better

    tuned = run(TuneRequest(profile="calibration/cpu-demo-batch", engine="trtllm", batch_sizes=(1, 8), rate=1.0,
                            tpot_target=0.15, duration=100, max_new_tokens=64))
    load = tuned.summary["load"]
    assert load["throughput_tuned"]["8"] == 1 and load["draft_lens"]["8"] == 0
    assert better(load["train"]["tuned"], load["train"]["throughput_tuned"]) > 0
    schedule = tuned.summary["load_config"]["speculative_config"]["draft_len_schedule"]
    assert schedule == load["draft_lens"] and load["max_batch"] == 8
    held = load["heldout"]
    assert better(held["tuned"], held["throughput_tuned"]) > 0  # and on held-out prompts
    with pytest.raises(SimspecError, match="pass --batch-sizes too"):
        TuneRequest(profile="calibration/cpu-demo-batch", rate=1.0).check()
