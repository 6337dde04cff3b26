"""The shipped artifacts are found from any directory (simspec.shipped), a missing one is a
one-line error saying how to get it, and the wheel's selection (setup.py) carries every file
the loaders read and none of the training leftovers. The wheel itself, installed in a bare
venv and run from /tmp, is checked by .ci/check-wheel."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest
import setuptools

from simspec.errors import SimspecError
from simspec.policies.artifact import read_policy_meta
from simspec.shipped import SHIPPED_DRAFTERS, locate, shipped_drafter, shipped_root
from simspec.sim.profile import load_profile

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """Run from a directory outside the checkout, with no override."""
    monkeypatch.delenv("SIMSPEC_SHIPPED", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_checkout_is_the_shipped_root_of_an_editable_install(elsewhere):
    assert shipped_root() == ROOT
    assert shipped_drafter("eagle") == ROOT / "real" / "drafters" / "eagle"
    assert shipped_drafter("lm") == ROOT / "real" / "drafters" / "lm"
    assert shipped_drafter("no-such-drafter") is None and shipped_drafter("a/b") is None


def test_shipped_defaults_load_from_another_directory(elsewhere):
    assert locate("calibration/traces-humaneval-eagle") == ROOT / "calibration" / "traces-humaneval-eagle"
    profile = load_profile("calibration/cpu-demo")
    assert profile.directory == ROOT / "calibration" / "cpu-demo"
    assert profile.traces_dir == (ROOT / "calibration" / "traces-humaneval-eagle").resolve()
    directory, meta = read_policy_meta("policies/ltd-cpu-demo")
    assert directory == ROOT / "policies" / "ltd-cpu-demo" and meta.algo == "ltd"


def test_a_path_that_exists_here_wins_over_the_shipped_one(elsewhere):
    (elsewhere / "calibration" / "cpu-demo").mkdir(parents=True)
    assert locate("calibration/cpu-demo") == Path("calibration/cpu-demo")
    assert locate(elsewhere / "absent") == elsewhere / "absent"  # absolute: as given
    assert locate("calibration/absent") == Path("calibration/absent")  # the loader reports it


def test_no_shipped_artifacts_is_one_line_naming_what_and_how(elsewhere, monkeypatch):
    monkeypatch.setenv("SIMSPEC_SHIPPED", str(elsewhere / "nothing"))
    assert shipped_root() is None
    for ask in (lambda: load_profile("calibration/cpu-demo"), lambda: read_policy_meta("policies/ltd-cpu-demo"),
                lambda: locate("real/drafters/eagle"), lambda: shipped_drafter("eagle")):
        with pytest.raises(SimspecError) as caught:
            ask()
        message = str(caught.value)
        assert "\n" not in message and "SIMSPEC_SHIPPED" in message
    assert locate("runs/mine") == Path("runs/mine")  # not a shipped folder: left to the caller
    assert shipped_drafter("my-drafter") is None


def test_the_override_names_the_only_shipped_root(elsewhere, monkeypatch):
    fake = elsewhere / "fake"
    (fake / "real" / "drafters" / "eagle").mkdir(parents=True)
    (fake / "real" / "drafters" / "eagle" / "config.json").write_text("{}")
    (fake / "calibration").mkdir()
    monkeypatch.setenv("SIMSPEC_SHIPPED", str(fake))
    assert shipped_root() == fake and shipped_drafter("eagle") == fake / "real" / "drafters" / "eagle"
    with pytest.raises(SimspecError, match="train-draft --kind lm"):
        shipped_drafter("lm")  # the root is there, that drafter is not


def test_the_wheel_ships_what_the_loaders_read_and_no_training_leftovers(monkeypatch):
    monkeypatch.setattr(setuptools, "setup", lambda **kwargs: None)
    monkeypatch.chdir(ROOT)
    shipped = set(runpy.run_path(str(ROOT / "setup.py"))["shipped_files"]())
    needed = {p.relative_to(ROOT).as_posix() for pattern in (
        "calibration/*/profile.json", "calibration/*/traces.*", "policies/*/policy.*", "policies/*/training.csv",
        *(f"real/drafters/{name}/{files}" for name in SHIPPED_DRAFTERS for files in (
            "config.json", "*.safetensors", "tokenizer*.json", "simspec.json", "README.md")))
        for p in ROOT.glob(pattern)}
    assert {"calibration/cpu-demo/profile.json", "calibration/traces-humaneval-eagle/traces.npz",
            "policies/ltd-cpu-demo/policy.npz", "real/drafters/eagle/model.safetensors"} <= needed
    assert needed <= shipped, f"not shipped: {sorted(needed - shipped)}"
    leftovers = [f for f in shipped if f.endswith((".sb3", ".pt", "history.json")) or "/tb/" in f]
    assert not leftovers
    # Earlier training stages, kept in the checkout for the results, do not ride along.
    assert {f.split("/")[2] for f in shipped if f.startswith("real/drafters/")} == set(SHIPPED_DRAFTERS)


def test_a_training_runs_work_folder_is_not_shipped(monkeypatch, tmp_path):
    """train-draft keeps its self-distilled text in OUT.partial/text/ (carried to resume elsewhere),
    the project its teacher-text store in real/teacher-text/: neither rides along in wheels."""
    monkeypatch.setattr(setuptools, "setup", lambda **kwargs: None)
    for path in ("real/drafters/eagle/config.json", "real/drafters/eagle.partial/text/a-000.jsonl.gz",
                 "real/drafters/eagle.partial/checkpoint.pt", "real/teacher-text/a-000.jsonl.gz"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("{}")
    monkeypatch.chdir(tmp_path)
    assert runpy.run_path(str(ROOT / "setup.py"))["shipped_files"]() == ["real/drafters/eagle/config.json"]
