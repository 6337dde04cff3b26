"""`validate --simulated`, `plot surface` and `bench-sim` on a small synthetic profile, through the
CLI's entry point in this process (numpy and the replay: nothing a subprocess would add)."""

from __future__ import annotations

import pytest
from helpers import cli, last_json, synthetic_profile, tagged_traces


@pytest.fixture(scope="module")
def profile_dir(tmp_path_factory):
    return synthetic_profile(tmp_path_factory.mktemp("sim"), tagged_traces(11))


def test_validate_simulated_reports_every_method_against_the_oracle(profile_dir):
    result = cli("validate", "--simulated", "--profile", str(profile_dir), "--json")
    assert result.returncode == 0, result.stderr
    summary = last_json(result)
    assert summary["split"] == "heldout" and summary["prompts"] == 3
    methods = [r["method"] for r in summary["rows"]]
    assert len(methods) == 9 and methods[0].startswith("eagle3") and methods[1].startswith("grid-best")
    for row in summary["rows"]:
        assert {"method", "speedup", "tau", "oracle_share", "draft_calls"} <= set(row)
        assert 0 < row["oracle_share"] <= 1 + 1e-9
    assert summary["cycles_per_s"] > 0


@pytest.mark.long
def test_seed_methods_report_rows_on_the_shipped_profile(tmp_path):
    """Seed 003's token-cache FSM and Q-learning agent and the two classifier stopping rules,
    by name, on the shipped traces (which store the prompts' tokens). The shipped profile timed
    their decisions when it was calibrated; a profile made before them did not, so their
    decision time is measured now and a warning says so (shown on the token-cache FSM alone: the
    classifiers' predictor would be fitted a second time for nothing, and each rule timed costs a
    second). Both runs replay the first 32 new tokens of each prompt: the same methods and warning
    as the whole budget, in less time."""
    import json

    from helpers import ROOT

    names = ["cachefsm-token", "qlearn-paper", "specdecpp", "disco"]
    shipped = ROOT / "calibration" / "cpu-demo"
    meta = json.loads((shipped / "profile.json").read_text())
    older = tmp_path / "older"
    older.mkdir()
    meta["policy_seconds"] = {k: v for k, v in meta["policy_seconds"].items() if k not in names}
    meta["traces"]["path"] = str((shipped / meta["traces"]["path"]).resolve())
    (older / "profile.json").write_text(json.dumps(meta))
    for profile, methods, warned in ((shipped, names, False), (older, names[:1], True)):
        result = cli("validate", "--simulated", "--profile", str(profile), "--baselines", ",".join(methods),
                     "--json", "--max-new-tokens", "32")
        assert result.returncode == 0, result.stderr
        rows = last_json(result)["rows"]
        shown = ["cachefsm-token", "qlearn-paper", "specdec++", "disco"][:len(methods)]
        assert [r["method"].split("(")[0] for r in rows] == shown
        assert all(r["speedup"] > 0.5 and r["tau"] > 1 for r in rows)
        said = " ".join(result.stderr.split())  # the console wraps its lines at its width
        assert ("measured now on this machine" in said) == warned, result.stderr


def test_surface_plot_and_replay_benchmark(profile_dir, tmp_path):
    result = cli("plot", "surface", "--profile", str(profile_dir), "--split", "all", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "surface-profile-all.png").stat().st_size > 10_000
    result = cli("bench-sim", "--profile", str(profile_dir), "--copies", "20", "--depth", "4", "--size", "6",
                 "--json")
    assert result.returncode == 0, result.stderr
    summary = last_json(result)
    assert summary["cycles"] > 0 and summary["cycles_per_s"] > 0
