"""Figures: each written atomically (no temporary file left, nothing half-written on an error or
Ctrl-C), an existing one refused in one line before any work unless ``force``, and a
validation's several figures refused or written all together. Drawn from shipped artifacts,
no model."""

from __future__ import annotations

import matplotlib.figure
import pytest
from helpers import ROOT

from simspec.errors import SimspecError
from simspec.report import figures, plots

PROFILE = str(ROOT / "calibration" / "cpu-demo")
POLICY = str(ROOT / "policies" / "radar-cpu-demo")
REPORT = str(ROOT / "research" / "runs" / "validate-T1-humaneval8")  # 7 methods, 3 learned: 5 figures
OLD = b"an earlier figure"


def _refusal(call) -> str:
    with pytest.raises(SimspecError) as refused:
        call()
    return str(refused.value)


def _listing(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_written_figure_leaves_no_temporary_file(tmp_path):
    path = figures.training(POLICY, str(tmp_path))
    assert path == tmp_path / "training-radar-cpu-demo.png"
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # the temporary sibling was renamed, not copied
    assert path.read_bytes().startswith(b"\x89PNG")


def test_an_interrupted_write_leaves_the_old_figure_and_no_temporary_file(tmp_path, monkeypatch):
    old = tmp_path / "training-radar-cpu-demo.png"
    old.write_bytes(OLD)

    def half_then_interrupted(self, file, **kwargs):
        file.write(b"\x89PNG half")
        raise KeyboardInterrupt

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", half_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        figures.training(POLICY, str(tmp_path), force=True)
    assert _listing(tmp_path) == {old.name: OLD}


@pytest.mark.parametrize("draw, name", [
    (lambda out, force: figures.curves(PROFILE, out, force=force), "curves-cpu-demo.png"),
    (lambda out, force: figures.surface(PROFILE, "heldout", None, out, force=force), "surface-cpu-demo-heldout.png"),
    (lambda out, force: figures.training(POLICY, out, force=force), "training-radar-cpu-demo.png"),
], ids=["curves", "surface", "training"])
def test_an_existing_figure_is_refused_in_one_line_before_any_loading(tmp_path, monkeypatch, draw, name):
    old = tmp_path / name
    old.write_bytes(OLD)

    def loaded(*args, **kwargs):
        raise AssertionError("an input was loaded before the existing figure was refused")

    monkeypatch.setattr("simspec.sim.profile.load_profile", loaded)
    monkeypatch.setattr("simspec.policies.artifact.read_policy_meta", loaded)
    message = _refusal(lambda: draw(str(tmp_path), False))
    assert "\n" not in message and str(old) in message and "--force" in message, message
    assert _listing(tmp_path) == {name: OLD}  # byte-identical, nothing beside it


def test_force_replaces_an_existing_figure(tmp_path):
    old = tmp_path / "curves-cpu-demo.png"
    old.write_bytes(OLD)
    path, analytic = figures.curves(PROFILE, str(tmp_path), force=True)
    assert path == old and not analytic
    assert old.read_bytes().startswith(b"\x89PNG")
    assert [p.name for p in tmp_path.iterdir()] == [old.name]


def test_validation_figures_are_refused_together_if_one_exists(tmp_path):
    (tmp_path / "time-breakdown.png").write_bytes(OLD)  # the second of five: the first must not be drawn
    message = _refusal(lambda: figures.validation(REPORT, str(tmp_path), None))
    assert "\n" not in message and str(tmp_path / "time-breakdown.png") in message and "--force" in message
    assert _listing(tmp_path) == {"time-breakdown.png": OLD}


def test_validation_figures_are_written_all_or_none(tmp_path, monkeypatch):
    written = figures.validation(REPORT, str(tmp_path), "eagle3")
    assert [p.name for p in written] == ["sim-vs-real.png", "time-breakdown.png", "action-map-ltd-cpu-demo.png",
                                         "action-map-ltd-cpu-demo-T1.png", "action-map-radar-cpu-demo-T1.png",
                                         "action-map-eagle3.png"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in written)  # no staging folder left
    for path in written:
        path.write_bytes(OLD)
    drawn = plots.plot_action_map

    def fails_on_the_last(report, method, out_dir, **kwargs):
        if method == "eagle3":
            raise RuntimeError("drawing failed")
        return drawn(report, method, out_dir, **kwargs)

    monkeypatch.setattr(plots, "plot_action_map", fails_on_the_last)
    with pytest.raises(RuntimeError):
        figures.validation(REPORT, str(tmp_path), "eagle3", force=True)
    assert _listing(tmp_path) == {p.name: OLD for p in written}  # the five drawn before it replaced nothing


def test_a_folder_in_a_figure_s_place_is_refused_even_with_force(tmp_path):
    (tmp_path / "curves-cpu-demo.png").mkdir()
    message = _refusal(lambda: figures.curves(PROFILE, str(tmp_path), force=True))
    assert "\n" not in message and "is a folder" in message


def test_a_kept_gzipped_report_is_read_and_a_damaged_one_refused_in_one_line(tmp_path):
    """``plot validation`` reads a kept run's ``report.json.gz``; one cut short or corrupted inside
    its deflate stream is one clear error naming the file, not a traceback."""
    import gzip
    import zlib
    from pathlib import Path

    from simspec.report.validation import read_report

    packed = (Path(REPORT) / "report.json.gz").read_bytes()
    assert read_report(REPORT).rows
    for name, damaged in (("cut", packed[:len(packed) // 2]), ("flipped", packed[:40] + bytes(20) + packed[60:])):
        with pytest.raises((EOFError, zlib.error)):  # damaged where gzip's own OSError does not look
            gzip.decompress(damaged)
        (tmp_path / name).mkdir()
        (tmp_path / name / "report.json.gz").write_bytes(damaged)
        message = _refusal(lambda: read_report(tmp_path / name))
        assert "report.json.gz is unreadable" in message and "\n" not in message
