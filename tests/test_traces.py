"""The trace format: saving, loading, the content hash, refusing altered or foreign traces
(numpy only; the tables against the engine's own trees are in test_recorder.py)."""

from __future__ import annotations

import numpy as np
import pytest

from simspec.errors import SimspecError
from simspec.sim.trace_files import load_traces, save_traces
from simspec.sim.traces import PromptTrace, assemble


def _tiny_traceset():
    rng = np.random.default_rng(0)
    traces = []
    for n in (3, 5):
        ranks = rng.integers(0, 50, size=(n, 3, 3)).astype(np.int16)
        scores = np.sort(rng.standard_normal((n, 3, 4)).astype(np.float16), axis=2)[:, :, ::-1]
        traces.append(PromptTrace(rng.integers(0, 100, size=n + 4), np.arange(n, dtype=np.int32) + 7, ranks,
                                  scores, scores[:, :, :2].copy(), False))
    return assemble(traces, [7, 9], {"depth_max": 4, "width": 2, "target": "t", "draft": "d",
                                     "prompt_ids": ["a", "b"]})


def test_round_trip_and_hash(tmp_path):
    traces = _tiny_traceset()
    content = save_traces(tmp_path, traces)
    back = load_traces(tmp_path)
    assert back.content_hash() == content == back.meta.content_hash
    assert back.positions == 8 and back.n_prompts == 2
    np.testing.assert_array_equal(back.path_rank, traces.path_rank)
    sub = back.subset(np.array([1]))
    assert sub.positions == 5 and sub.meta.prompt_ids == ["b"]


def test_altered_or_foreign_traces_are_refused(tmp_path):
    save_traces(tmp_path, _tiny_traceset())
    meta = (tmp_path / "traces.json").read_text()
    (tmp_path / "traces.json").write_text(meta.replace('"content_hash": "', '"content_hash": "0'))
    with pytest.raises(SimspecError, match="do not match their recorded hash"):
        load_traces(tmp_path)
    (tmp_path / "traces.json").write_text(meta.replace('"schema_version": 2', '"schema_version": 99'))
    with pytest.raises(SimspecError, match="not a simspec-traces v2"):
        load_traces(tmp_path)
    (tmp_path / "traces.json").write_text(meta)
    (tmp_path / "traces.npz").write_bytes(b"not a zip")
    with pytest.raises(SimspecError, match="missing or corrupt"):
        load_traces(tmp_path)
