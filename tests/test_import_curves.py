"""`calibrate --import-curves`: a profile from latency curves measured in another engine (JSON
or CSV), fitted and checked like measured ones, marked IMPORTED, refused by the live engine.
No models are loaded."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers import cli, cli_fd, last_json, simspec, tagged_traces

from simspec.sim.profile import load_profile
from simspec.sim.trace_files import save_traces

POINTS = ([("verify", n, c, 0.006 + 2e-5 * n + 2e-7 * c) for c in (256, 2048) for n in (1, 4, 16, 64, 128)]
          + [("draft", n, c, 0.0006 + 1e-6 * n) for c in (256, 2048) for n in (1, 2, 4, 8)]
          + [("greedy", 1, c, 0.0058 + 2e-7 * c) for c in (256, 1024, 2048)])


@pytest.fixture(scope="module")
def traces_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("import")
    save_traces(root / "traces", tagged_traces(2))
    return root / "traces"


def curves(**change) -> dict:
    blob = {"schema": "simspec-curves", "schema_version": 1, "device": "NVIDIA H100 80GB HBM3",
            "engine": {"name": "sglang", "version": "0.5.3", "settings": "cuda graphs"}, "dtype": "bf16",
            "samples": [{"kind": k, "n": n, "context": c, "seconds": [s, s * 1.01]} for k, n, c, s in POINTS]}
    return {**blob, **change}


def _import_args(tmp_path, traces_dir, file, name="p") -> list[str]:
    return ["calibrate", "--import-curves", str(file), "--traces-from", str(traces_dir), "--target", "t", "--draft",
            "d", "--out", str(tmp_path / name), "--json"]


def _import(tmp_path, traces_dir, file, name="p"):
    return simspec(*_import_args(tmp_path, traces_dir, file, name))


def in_process(args: list[str], folder: Path, capfd) -> subprocess.CompletedProcess:
    """``simspec.cli.main(ARGS)`` in this process, from ``folder`` with ``folder/.tmp`` as the
    temporary directory: its exit status and what reached file descriptors 1 and 2 (as
    tests/test_bad_input.py runs its rows; a subprocess would spend a second importing)."""
    (folder / ".tmp").mkdir(exist_ok=True)
    return cli_fd(args, folder, capfd, tmp=folder / ".tmp")


def files_under(folder: Path) -> dict[str, tuple[int, int] | None]:
    return {str(p.relative_to(folder)): None if p.is_dir() else (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*"))}


@pytest.mark.e2e
def test_json_and_csv_curves_give_the_same_imported_profile(tmp_path, traces_dir):
    (tmp_path / "c.json").write_text(json.dumps(curves()))
    rows = [f"{k},{n},{c},{s!r}\n{k},{n},{c},{s * 1.01!r}" for k, n, c, s in POINTS]
    (tmp_path / "c.csv").write_text("# device: NVIDIA H100 80GB HBM3\n# engine: sglang\n# engine_version: 0.5.3\n"
                                    "# engine_settings: cuda graphs\n# dtype: bf16\nkind,n,context,seconds\n"
                                    + "\n".join(rows) + "\n")
    # the JSON file as a user imports it (a process of its own), the CSV one in this process
    for result in (_import(tmp_path, traces_dir, tmp_path / "c.json", "pj"),
                   cli(*_import_args(tmp_path, traces_dir, tmp_path / "c.csv", "pc"))):
        assert result.returncode == 0, result.stderr
        assert last_json(result)["kind"] == "imported"
    a, b = load_profile(tmp_path / "pj"), load_profile(tmp_path / "pc")
    assert a.samples == b.samples and a.meta.runtime == "sglang 0.5.3 (cuda graphs)"
    assert a.kind == "imported" and "IMPORTED" in a.label and a.meta.device_model == "NVIDIA H100 80GB HBM3"
    assert float(a.cost.verify(16, 256)) == pytest.approx(0.006 + 2e-5 * 16 + 2e-7 * 256, rel=0.02)
    assert a.traces().meta.content_hash == json.loads((traces_dir / "traces.json").read_text())["content_hash"]
    # tune answers with the imported curves and says whose they are
    tuned = cli("tune", "--profile", str(tmp_path / "pj"), "--engine", "sglang", "--json")
    assert tuned.returncode == 0, tuned.stderr
    assert last_json(tuned)["runtime"] == "sglang 0.5.3 (cuda graphs)" and "IMPORTED curves" in tuned.stderr
    # the live engine cannot check another engine's curves
    real = cli("validate", "--real", "--profile", str(tmp_path / "pj"), "--n-prompts", "1")
    assert real.returncode == 2 and "whose curves these are not" in real.stderr


@pytest.mark.parametrize("change, message", [
    ({"schema": "x"}, "not a simspec-curves v1 file"),
    ({"device": ""}, "field 'device'"),
    ({"engine": {"name": "sglang"}}, "field 'engine' needs a 'name' and a 'version'"),
    ({"samples": [{"kind": "verify", "n": 4, "context": 0, "seconds": [0.01]}]}, "no draft samples"),
    ({"samples": [{"kind": "verify", "n": 4, "context": 0, "seconds": [-1]}]}, "sample 0 must have"),
    ({"samples": [{"kind": "decode", "n": 4, "context": 0, "seconds": [1]}]}, "sample 0 must have"),
])
def test_bad_curves_are_one_line_and_write_nothing(tmp_path, traces_dir, change, message, capfd):
    (tmp_path / "c.json").write_text(json.dumps(curves(**change)))
    (tmp_path / ".tmp").mkdir()
    before = files_under(tmp_path)
    result = in_process(_import_args(tmp_path, traces_dir, tmp_path / "c.json"), tmp_path, capfd)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert not (tmp_path / "p").exists()
    assert files_under(tmp_path) == before  # nothing new beside the curves, in --out or in $TMPDIR


def test_import_needs_traces_or_none(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps(curves()))
    result = cli("calibrate", "--import-curves", str(tmp_path / "c.json"), "--out", str(tmp_path / "p"))
    assert result.returncode == 2 and "--import-curves needs the trees the curves will price" in result.stderr


@pytest.mark.e2e
def test_analytic_profiles_state_their_runtime():
    """Also the shipped ones, made before profiles stored it: the same device table priced them."""
    profile = load_profile("calibration/h100-demo-analytic")
    assert "us launch and framework overhead per kernel" in profile.runtime and "no CUDA graphs" in profile.runtime
    tuned = simspec("tune", "--profile", "calibration/h100-demo-analytic", "--json")
    assert tuned.returncode == 0 and last_json(tuned)["runtime"] == profile.runtime
    assert "ANALYTIC profile: roofline of an eager runtime" in tuned.stderr


def test_the_roofline_tracks_the_h200_measured_under_cuda_graphs():
    """research/runs/gpu/h200 (measured on a lent H200, scripts/gpu/): the curves files load, and the
    analytic model prices the 8B target's verify forwards within 25 % of the CUDA-graph runtime
    at every point (measured 0.93-1.22x), while simspec's eager engine there is host-bound:
    the same forward costs ~4x the roofline, and V = 256 costs what V = 1 does."""
    import numpy as np

    from simspec.sim.analytic import LLAMA31_8B, device_spec, forward_seconds
    from simspec.sim.imported import load_curves

    h200 = device_spec("h200")
    ratios = {}
    for runtime, name in (("graph", "graph-curves"), ("eager", "curves")):
        meta, samples = load_curves(f"research/runs/gpu/h200/{name}-llama-3.1-8b.json")
        assert meta["device"] == "NVIDIA H200" and meta["target"] == "arch:llama-3.1-8b"
        ratios[runtime] = {(s["n"], s["context"]): s["median"] / forward_seconds(h200, LLAMA31_8B, s["n"], s["context"])
                           for s in samples if s["kind"] == "verify"}
    graph = np.array(list(ratios["graph"].values()))
    assert len(graph) == 102 and 0.75 < graph.min() and graph.max() < 1.25
    assert np.median(list(ratios["eager"].values())) > 3
    eager_256, eager_1 = (ratios["eager"][(v, 512)] * forward_seconds(h200, LLAMA31_8B, v, 512) for v in (256, 1))
    assert eager_256 / eager_1 < 1.1
