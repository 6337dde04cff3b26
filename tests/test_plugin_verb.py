"""A verb from outside the package, by the recipe of docs/extending.md#a-verb: a request dataclass
whose fields are flags (the shared ones from ``simspec.flags``), the work in the module that owns
it, and a body registered with ``simspec.flags.command`` that only renders. Named in
$SIMSPEC_PLUGINS, it is in ``simspec --help``, runs with its flags, ends with ``--json``, and its
bad input is one line with exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import last_json, simspec

ROOT = Path(__file__).resolve().parents[1]

PLUGIN = '''
from dataclasses import dataclass

from simspec import flags
from simspec.cli import Json, app
from simspec.flags import command, opt
from simspec.report.console import json_line, out


@dataclass(frozen=True, kw_only=True)
class CountRequest:
    profile: str = flags.profile()
    split: str = flags.split()
    at_least: int = opt(1, "Count only prompts with at least this many traced positions.", min=1)


def count(request: CountRequest) -> dict:
    """The work: how many of the profile's traced prompts are in the split."""
    import numpy as np

    from simspec.sim.profile import load_profile

    traces = load_profile(request.profile).traces()
    splits = np.array(traces.meta.splits)
    lengths = np.diff(traces.prompt_offsets)  # traced positions per prompt
    keep = (splits == request.split) & (lengths >= request.at_least)
    return {"split": request.split, "prompts": int(keep.sum())}


@command(app, "count-prompts", "count_plugin:CountRequest")
def count_prompts(request, as_json: Json = False) -> None:
    """Count a profile's traced prompts in a split."""
    summary = count(request)
    out.print(f"{summary['prompts']} {summary['split']} prompts")
    json_line(as_json, summary)
'''


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    folder = tmp_path_factory.mktemp("verb")
    (folder / "count_plugin.py").write_text(PLUGIN)
    return {"SIMSPEC_PLUGINS": "count_plugin", "PYTHONPATH": f"{folder}:{ROOT / 'tests'}", "COLUMNS": "200"}


@pytest.mark.e2e
def test_an_outside_verb_runs_with_its_flags_and_refuses_bad_input_in_one_line(plugin):
    from simspec.sim.profile import load_profile

    listed = simspec("--help", env=plugin)
    assert "count-prompts" in listed.stdout and "Count a profile's traced prompts" in listed.stdout
    run = simspec("count-prompts", "--profile", "calibration/cpu-demo", "--split", "heldout", "--json", env=plugin)
    assert run.returncode == 0, run.stderr
    meta = load_profile(ROOT / "calibration" / "cpu-demo").traces().meta
    assert last_json(run) == {"split": "heldout", "prompts": list(meta.splits).count("heldout")}
    shown = simspec("count-prompts", "--help", env=plugin)
    text = " ".join(shown.stdout.split())
    assert "--at-least" in text and "its latency curves and the draft trees" in text  # --profile's shared help
    missing = simspec("count-prompts", "--profile", "no/such/profile", env=plugin)
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1, missing.stderr
    bound = simspec("count-prompts", "--profile", "calibration/cpu-demo", "--at-least", "0", env=plugin)
    assert bound.returncode == 2 and "--at-least" in bound.stderr
