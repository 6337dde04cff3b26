"""``simspec migrate-traces``: a trace folder as older versions wrote it (no prompt tokens, no
child ranks) is brought up to date in place, with exactly the arrays ``calibrate`` records
today, under the same content hash; a folder up to date is left alone."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from helpers import cli, last_json

from simspec.sim.trace_files import load_traces, save_traces
from simspec.sim.traces import TraceMeta

pytestmark = pytest.mark.model  # it walks continuations with the demo target and its drafter


def _old_folder(folder):
    """Two prompts of the shipped greedy traces, saved without the arrays older versions lacked."""
    shipped = load_traces("calibration/traces-humaneval-eagle")
    today = shipped.subset(np.array([3, 40]))
    meta = {k: v for k, v in today.meta.to_json().items()
            if k not in ("schema", "schema_version", "content_hash", "positions", "n_prompts")}
    old = replace(today, prompt_tokens=None, child_rank=None, meta=TraceMeta.of(meta))
    save_traces(folder, old)
    return today


def test_an_old_folder_gets_todays_arrays_under_its_own_hash(tmp_path):
    folder = tmp_path / "old"
    today = _old_folder(folder)
    before = json.loads((folder / "traces.json").read_text())["content_hash"]
    assert not load_traces(folder).has_prompt_tokens
    done = cli("migrate-traces", "--traces", folder, "--json")
    assert done.returncode == 0, done.stderr
    (row,) = last_json(done)["folders"]
    assert row["added"] == ["prompt tokens", "child ranks"] and row["content_hash"] == before
    migrated = load_traces(folder)  # the hash verified on load
    assert migrated.meta.content_hash == before
    assert np.array_equal(migrated.prompt_tokens, today.prompt_tokens)
    assert np.array_equal(migrated.child_rank, today.child_rank)
    assert sorted(p.name for p in folder.iterdir()) == ["traces.json", "traces.npz"]  # nothing staged left
    again = cli("migrate-traces", "--traces", folder)
    assert again.returncode == 0 and "up to date, left alone" in again.stdout
