"""`simspec sweep`: trainings over algorithms x seeds on one profile, one after another and as
Ray tasks on a local Ray instance, with the same policy per seed either way."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from helpers import cli, last_json, simspec, synthetic_profile, tagged_traces

from simspec.train.sweep import table

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def profile_dir(tmp_path_factory):
    # RADAR trains on at least 5 train prompts: 14 prompts, 7 of them train
    return synthetic_profile(tmp_path_factory.mktemp("sweep"), tagged_traces(3, n_prompts=14),
                             policy_seconds={"static": 1e-6, "radar_call": 2e-5})


def _arrays(folder) -> dict:
    with np.load(folder / "policy.npz") as blob:
        return {k: blob[k] for k in blob.files}


@pytest.mark.long
def test_two_trials_give_the_same_policies_with_and_without_ray(profile_dir, tmp_path):
    args = ["sweep", "--profile", profile_dir, "--algos", "radar", "--preset", "smoke", "--json"]
    # Side by side (every trial trains with one torch thread either way): the Ray sweep as a user
    # runs it, two trials one after the other in its one worker, and the second trial alone through
    # the same entry point in this process, which has loaded torch already (a trial's policy must
    # depend neither on the process it trains in nor on the trial before it there).
    with ThreadPoolExecutor(1) as pool:
        ray = pool.submit(simspec, *args, "--seeds", "1,2", "--out", str(tmp_path / "ray"), "--ray", "local",
                          "--workers", "1", timeout=600)
        plain = cli(*args, "--seeds", "2", "--out", str(tmp_path / "plain"))
        ray = ray.result()
    assert plain.returncode == 0, plain.stderr
    assert ray.returncode == 0, ray.stderr
    a, b = _arrays(tmp_path / "plain" / "radar-throughput-s2"), _arrays(tmp_path / "ray" / "radar-throughput-s2")
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(*(next(iter(_arrays(tmp_path / "ray" / f"radar-throughput-s{s}").values()))
                                for s in (1, 2)))  # the seed matters
    summary = last_json(ray)
    assert [r["seed"] for r in summary["trials"]] == [1, 2] and len(summary["table"]) == 1
    assert json.loads((tmp_path / "ray" / "sweep.json").read_text())["table"] == summary["table"]


def test_the_table_is_mean_and_sd_over_seeds():
    rows = [{"algo": "ltd", "reward": "throughput", "seed": s, "heldout_speedup": v, "grid_best_speedup": 1.0,
             "eagle3_speedup": 0.7} for s, v in ((1, 1.2), (2, 1.4))]
    (row,) = table(rows)
    assert row["speedup_mean"] == pytest.approx(1.3) and row["speedup_sd"] == pytest.approx(np.std([1.2, 1.4], ddof=1))
