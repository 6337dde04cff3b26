"""The extension registries (issue 46): a rule baseline registered from this module, outside the
package, runs in replay (``validate --simulated``'s path) and on the real engine, and shows up in
the CLI's help; the built-ins' names, defaults and help come from the registry; an unknown name
is still one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from simspec.errors import SimspecError
from simspec.policies.baselines import DepthBudget
from simspec.policies.registry import (BASELINE_REGISTRY, RuleContext, baseline, baseline_names, baselines_help,
                                       default_baselines, register_baseline, timing_policies)

ROOT = Path(__file__).resolve().parents[1]
PROFILE = "calibration/cpu-demo"


class AIMD(DepthBudget):
    """Additive increase, multiplicative decrease of the depth (TCP's congestion rule): ``step``
    levels deeper after a cycle that accepted everything it drafted, half as deep otherwise."""

    def __init__(self, step: int, width: int, max_depth: int, size: int) -> None:
        super().__init__(width, max_depth, size)
        self.step = step
        self.name = f"aimd(+{step})"

    def reset_batch(self, n):
        self.depth = np.full(n, 4, dtype=np.int64)

    def plan_batch(self, rows, context):
        return self.depth[rows].copy(), np.full(len(rows), self.size)

    def observe_batch(self, rows, depth, size, accepted):
        full = accepted >= depth - 1
        self.depth[rows] = np.clip(np.where(full, depth + self.step, depth // 2), 2, self.max_depth)


def register() -> None:
    """What a user's module does: one decorated factory."""
    @register_baseline("aimd", help="additive increase, multiplicative decrease of the depth", grid=(1, 2),
                       timing_value=1)
    def aimd(ctx: RuleContext, step: int) -> AIMD:
        return AIMD(step, ctx.width, ctx.depth_max, ctx.size)


@pytest.fixture
def aimd():
    register()
    yield "aimd"
    BASELINE_REGISTRY.remove("aimd")


def test_the_builtins_keep_their_names_order_and_defaults():
    assert baseline_names() == ("eagle3", "grid", "ddd", "svip", "gammatune", "analytic", "fsm", "cachefsm",
                                "cachefsm-token", "qlearn", "qlearn-paper", "specdecpp", "disco")
    assert default_baselines() == ("eagle3", "grid", "ddd", "svip", "gammatune", "analytic", "fsm", "cachefsm",
                                   "qlearn")


def test_an_outside_baseline_registers_once_and_leaves_cleanly(aimd):
    assert baseline_names()[-1] == aimd and baseline(aimd).grid == (1, 2)
    with pytest.raises(ValueError, match="registered twice"):
        register()
    assert aimd in timing_policies(_cost(), 10, 8)  # the decision-time table follows the registry
    assert "aimd (additive increase" in baselines_help()
    BASELINE_REGISTRY.remove(aimd)
    assert aimd not in baseline_names()
    register()  # the fixture removes it again


def test_unknown_baseline_is_one_line():
    from simspec.sim.evaluate import check_names

    with pytest.raises(SimspecError) as caught:
        check_names(["ddd", "nope"])
    assert str(caught.value) == ("unknown baseline 'nope': choose from eagle3, grid, ddd, svip, gammatune, analytic, "
                                 "fsm, cachefsm, cachefsm-token, qlearn, qlearn-paper, specdecpp, disco, select or "
                                 "static:D,V")
    with pytest.raises(SimspecError, match=r"^unknown baseline 'select': .* disco or static:D,V$"):
        check_names(["select"], prompt_level=False)  # validate --real: no per-prompt methods


def test_an_outside_baseline_runs_in_replay(aimd):
    """``validate --simulated``'s own path: tuned on the train split over its grid, scored on
    held-out prompts, charged a decision time measured now (the profile predates it)."""
    import contextlib

    from simspec.sim.run import SimulatedRequest, validate_simulated

    result = validate_simulated(SimulatedRequest(PROFILE, ("fsm", aimd)), lambda _: contextlib.nullcontext())
    rows = {row["method"]: row for row in result.summary["rows"]}
    tuned = [name for name in rows if name.startswith("aimd(+")]
    assert len(tuned) == 1 and rows[tuned[0]]["speedup"] > 0.5
    assert any("decision time of aimd measured now" in note for note in result.notes)


def test_the_validate_help_and_default_come_from_the_registry():
    import typer

    from simspec.cli import app

    [option] = [p for p in typer.main.get_command(app).commands["validate"].params if p.name == "baselines"]
    assert option.default == ",".join(default_baselines())
    for spec in BASELINE_REGISTRY.specs():
        assert f"{spec.name} ({spec.help})" in option.help


@pytest.mark.e2e
def test_the_cli_lists_an_outside_baseline_registered_before_it_loads():
    """A plugin module imported before the CLI (as the ``simspec.plugins`` entry point does) is
    in ``validate --help``."""
    code = ("import sys; sys.path.insert(0, 'tests'); import test_registry; test_registry.register(); "
            "from simspec.cli import main; main(['validate', '--help'])")
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                           env={"COLUMNS": "400", "PATH": "/usr/bin:/bin"})
    assert "aimd (additive increase, multiplicative decrease of the depth)" in " ".join(
        shown.stdout.replace("│", " ").split()), shown.stderr


@pytest.mark.model
def test_an_outside_baseline_runs_on_the_engine_losslessly(aimd, target, prompt_ids):
    """Built as validate --real builds it (tuned on the profile's train traces), then a few
    tokens of one prompt on the real engine: equal to plain greedy decoding."""
    from simspec.engine.load import load_drafter
    from simspec.engine.speculative import SpeculativeEngine
    from simspec.sim.evaluate import build_baselines, split_traces
    from simspec.sim.profile import load_profile

    profile = load_profile(PROFILE)
    [policy] = build_baselines([aimd], split_traces(profile.traces(), "train"), profile.cost, 16)
    assert policy.family == aimd and isinstance(policy, AIMD)
    engine = SpeculativeEngine(target, load_drafter("eagle", target))
    ids = prompt_ids[0][1]
    live = engine.generate(ids, policy, 12)
    assert live.tokens == engine.greedy(ids, 12).tokens
    assert len({c.depth for c in live.cycles}) > 1  # the rule moved the depth, cycle by cycle


def _cost():
    from simspec.sim.costmodel import CostModel, Point

    return CostModel([Point("verify", n, c, 0.06 + 1e-3 * n) for c in (64, 512) for n in (1, 8, 64)]
                     + [Point("draft", n, c, 0.005 + 1e-4 * n) for c in (64, 512) for n in (1, 4, 16)])
