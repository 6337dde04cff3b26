"""Trace recording sharded over Ray (``calibrate --traces-only --ray``): the merged traces hash
as a single-process recording of the same prompts, also when a worker dies and its shard is
retried. A local Ray instance, started by the command itself; the tiny random target with the
demo target's tokenizer (conftest.py) and its first two layers drafting, which every worker
loads from a directory as a user's model."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import cli, last_json, simspec

from simspec.engine.greedy import length_batches
from simspec.measure.shards import shard_prompts

pytestmark = [pytest.mark.e2e]

RECORD = ("calibrate", "--traces-only", "--prompts", "humaneval+sharegpt", "--n-prompts", "5", "--max-new-tokens",
          "8", "--check-prompts", "0", "--draft", "target-layers:2", "--json")


def test_shards_are_whole_batches_of_the_single_process_recording():
    prompts = [[0] * n for n in (9, 3, 7, 3, 12, 5, 1, 8, 8, 2)]
    batches = length_batches(prompts, 3)
    shards = shard_prompts(prompts, 2, 3)
    assert sorted(i for shard in shards for i in shard) == list(range(10))
    for shard in shards:  # a shard re-batched on its own gives the same groups
        again = [[shard[j] for j in group] for group in length_batches([prompts[i] for i in shard], 3)]
        assert all(group in batches for group in again)
    assert len(shard_prompts(prompts, 8, 3)) == len(batches)  # never more shards than batches


@pytest.mark.long(seconds=40)
@pytest.mark.model
def test_ray_recording_hashes_as_one_process_even_after_a_killed_worker(tmp_path, tiny_target_dir):
    fail_once = tmp_path / "fail-once"
    fail_once.mkdir()
    record = (*RECORD, "--target", str(tiny_target_dir))
    with ThreadPoolExecutor(2) as pool:  # side by side: thread counts are pinned, so load changes no tree
        single = pool.submit(simspec, *record, "--out", str(tmp_path / "single"))
        sharded = pool.submit(simspec, *record, "--out", str(tmp_path / "ray"), "--ray", "local", "--workers", "2",
                              timeout=600, env={"SIMSPEC_RAY_FAIL_ONCE": str(fail_once)})
        single, sharded = single.result(), sharded.result()
    assert single.returncode == 0, single.stderr
    assert sharded.returncode == 0, sharded.stderr
    assert (fail_once / "failed").exists()  # one worker died, and its shard was recorded again
    hashes = [json.loads((tmp_path / name / "traces.json").read_text())["content_hash"] for name in ("single", "ray")]
    assert hashes[0] == hashes[1]
    assert last_json(sharded)["positions"] == last_json(single)["positions"] > 0
    meta = json.loads((tmp_path / "ray" / "traces.json").read_text())
    assert meta["ray"] == {"address": "local", "shards": 2} and meta["threads"] >= 1


def test_ray_needs_a_recording(tmp_path):
    result = cli("calibrate", "--gpu", "h100", "--traces-from", "calibration/traces-humaneval-eagle", "--quick",
                     "--out", str(tmp_path / "p"), "--ray", "local")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "simspec: error: --ray shards trace recording: use it where traces are recorded (--traces-only, or a "
        "calibration without --traces-from / --no-traces)"]


@pytest.mark.long(seconds=8)
def test_a_load_sweep_on_ray_gives_what_each_profile_alone_gives(tmp_path):
    import contextlib

    from simspec.measure.load import LoadRequest, run

    profiles = ("calibration/cpu-demo-batch", "calibration/h100-demo-analytic")
    swept = simspec("load", "--max-batch", "1", "--rates", "0.05,0.5", "--duration", "60", "--baselines", "static:4,8",
                    "--max-new-tokens", "32", "--json", "--profile", profiles[0], "--sweep", profiles[1], "--ray",
                    "local", "--workers", "2", "--out", str(tmp_path / "sweep"), timeout=600)
    assert swept.returncode == 0, swept.stderr
    s = last_json(swept)
    assert (s["runs"], s["ray"]) == (4, "local")
    for merged, profile in zip(s["profiles"], profiles):
        alone = run(LoadRequest(profile=profile, max_batch=1, rates=(0.05, 0.5), duration=60.0,
                                baselines=("static:4,8",), max_new_tokens=32),
                    lambda *a, **k: lambda *a, **k: None, lambda text: contextlib.nullcontext())
        assert (merged["profile"], merged["rows"], merged["verdicts"]) == (profile, alone["rows"], alone["verdicts"])
    assert s["written"] == [str(tmp_path / "sweep" / n) for n in ("load-sweep.json", "load-1.png", "load-2.png")]
    assert json.loads((tmp_path / "sweep" / "load-sweep.json").read_text())["profiles"] == s["profiles"]
