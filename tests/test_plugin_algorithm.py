"""A learned algorithm from outside the package, whole: a loose module named in $SIMSPEC_PLUGINS
registers its inference side, its trainer and its own options class (a flag of its own), and
nothing else changes. ``simspec train --simulated --algo fixed-v`` trains it with that flag,
``validate --simulated`` scores the policy folder, and the real engine decodes with it exactly
as plain greedy decoding (the recipe of docs/extending.md#a-learned-algorithm)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import last_json, simspec

ROOT = Path(__file__).resolve().parents[1]

PLUGIN = '''
from dataclasses import dataclass

from simspec.flags import opt
from simspec.policies.algorithms import register_learned
from simspec.policies.base import StaticPolicy
from simspec.train.trainers import AlgorithmOptions, Fitted, register_trainer


@register_learned("fixed-v", help="the grid's depth with a verified size of its own",
                  fields={"size": int, "depth": int})
def build(spec, arrays, name):
    return StaticPolicy(spec["depth"], spec["width"], spec["size"], name)


@dataclass(frozen=True, kw_only=True)
class FixedOptions(AlgorithmOptions):
    verified: int = opt(6, "fixed-v only: the verified size V of every cycle.", min=2)

    def name_parts(self):
        return [f"v{self.verified}"]


@register_trainer("fixed-v", work=lambda request: 1, options=FixedOptions, precisions=("fp32",), uses_torch=False)
def fit(request, setting, log, advance, work):
    import sys

    assert "torch" not in sys.modules, "a numpy trainer's run loaded torch"  # uses_torch=False: seconds saved
    depth, size = setting.grid_depth, request.options.verified
    policy = StaticPolicy(depth, setting.width, size)
    advance(1)
    spec = {"width": setting.width, "depth_max": setting.depth_max, "size": size, "depth": depth}
    return Fitted(policy, spec, {}, 0, setting.validation_speedup(policy), {"verified": size}, [])
'''


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    folder = tmp_path_factory.mktemp("plugin")
    (folder / "fixed_v.py").write_text(PLUGIN)
    return {"SIMSPEC_PLUGINS": "fixed_v", "PYTHONPATH": f"{folder}:{ROOT / 'tests'}"}


@pytest.fixture(scope="module")
def trained(plugin, tmp_path_factory):
    # into the default folder, whose name takes the options' part
    folder = tmp_path_factory.mktemp("trained")
    run = simspec("train", "--simulated", "--profile", str(ROOT / "calibration" / "cpu-demo"), "--algo", "fixed-v",
                  "--verified", "9", "--preset", "smoke", "--json", env=plugin, cwd=folder)
    assert run.returncode == 0, run.stderr
    return folder / last_json(run)["policy"], last_json(run)


@pytest.mark.e2e
def test_an_outside_algorithm_trains_with_its_own_flag_and_validates_in_the_simulator(plugin, trained, tmp_path):
    out, summary = trained
    meta = json.loads((out / "policy.json").read_text())
    assert summary["algo"] == "fixed-v" and meta["policy"]["size"] == 9 and meta["verified"] == 9
    shown = simspec("train", "--help", env={**plugin, "COLUMNS": "200"})
    assert "--verified" in shown.stdout and "fixed-v only" in shown.stdout
    # Its flag is its own: given with another algorithm, one line.
    other = simspec("train", "--simulated", "--profile", "calibration/cpu-demo", "--algo", "radar", "--verified", "9",
                    "--out", str(tmp_path / "x"), env=plugin)
    assert other.returncode == 2 and "--verified applies to --algo fixed-v only" in other.stderr
    assert summary["policy"] == "policies/fixed-v-cpu-demo-smoke-v9"  # the default folder's name
    scored = simspec("validate", "--simulated", "--profile", "calibration/cpu-demo", "--baselines", "eagle3",
                     "--policies", str(out), "--json", env=plugin)
    assert scored.returncode == 0, scored.stderr
    assert {r["method"] for r in last_json(scored)["rows"]} >= {out.name}


@pytest.mark.model
@pytest.mark.e2e
def test_an_outside_algorithms_policy_decodes_on_the_engine_as_greedy(plugin, trained, target, prompt_ids,
                                                                   monkeypatch):
    from simspec.engine.load import load_drafter
    from simspec.engine.speculative import SpeculativeEngine
    from simspec.policies.algorithms import LEARNED
    from simspec.policies.artifact import load_policy
    from simspec.train.trainers import TRAINERS

    out, _ = trained
    monkeypatch.syspath_prepend(plugin["PYTHONPATH"].split(":")[0])
    monkeypatch.delitem(sys.modules, "fixed_v", raising=False)
    __import__("fixed_v")  # this process registers it as the CLI's did; forgotten after the test
    try:
        policy, meta = load_policy(out)
        assert meta.algo == "fixed-v" and policy.plan_batch(np.zeros(1, dtype=np.int64), np.array([10]))[1][0] == 9
        engine = SpeculativeEngine(target, load_drafter("eagle", target))
        ids = prompt_ids[0][1]
        assert engine.generate(ids, policy, 12).tokens == engine.greedy(ids, 12).tokens
    finally:
        LEARNED.remove("fixed-v")  # the worker's later tests see the built-in algorithms only
        TRAINERS.remove("fixed-v")
        sys.modules.pop("fixed_v", None)
