"""The extension registries (issue 46): a rule baseline registered from this module, outside the
package, runs in replay (``validate --simulated``'s path) and on the real engine, and shows up in
the CLI's help; the built-ins' names, defaults and help come from the registry; an unknown name
is still one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import last_json, simspec, synthetic_profile, tagged_traces

from simspec.errors import SimspecError
from simspec.policies.baselines import DepthBudget
from simspec.policies.registry import (
    BASELINE_REGISTRY,
    RuleContext,
    baseline,
    baseline_names,
    baselines_help,
    default_baselines,
    register_baseline,
    timing_policies,
)

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


@pytest.fixture(scope="module")
def small_profile(tmp_path_factory) -> str:
    """A measured profile of 9 synthetic prompts (5 train, 4 held-out) that timed the static
    trees' and fsm's decisions but, like the shipped one, not aimd's: the replay path in a
    fraction of a second (the shipped profile's grid search alone takes 1.5 s)."""
    return synthetic_profile(tmp_path_factory.mktemp("registry"), tagged_traces(4, n_prompts=9),
                             policy_seconds={"static": 2e-5, "fsm": 2e-4})


def test_the_builtins_keep_their_names_order_and_defaults():
    assert baseline_names() == ("eagle3", "grid", "ddd", "svip", "gammatune", "analytic", "fsm", "cachefsm",
                                "cachefsm-token", "qlearn", "qlearn-paper", "specdecpp", "disco", "c2t",
                                "bayes", "sequoia", "sequoia-depth", "sglang-adaptive", "vllm-schedule",
                                "trtllm-schedule", "queue-aware")
    assert default_baselines() == ("eagle3", "grid", "ddd", "svip", "gammatune", "analytic", "fsm", "cachefsm",
                                   "qlearn")
    # The decision-time table keeps its entries: 'static' (paid by eagle3, grid and static:D,V) and every rule.
    assert set(timing_policies(_cost(), 10, 8)) == {"static", *baseline_names()} - {
        "eagle3", "grid", "vllm-schedule", "trtllm-schedule", "queue-aware", "sequoia", "sequoia-depth"}


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
                                 "fsm, cachefsm, cachefsm-token, qlearn, qlearn-paper, specdecpp, disco, c2t, bayes, "
                                 "sequoia, sequoia-depth, sglang-adaptive, vllm-schedule, trtllm-schedule, "
                                 "queue-aware, select or static:D,V")
    with pytest.raises(SimspecError, match=r"^unknown baseline 'select': .* queue-aware or static:D,V$"):
        check_names(["select"], prompt_level=False)  # validate --real: no per-prompt methods


def test_an_outside_baseline_runs_in_replay(aimd, small_profile):
    """``validate --simulated``'s own path: tuned on the train split over its grid, scored on
    held-out prompts, charged a decision time measured now (the profile predates it)."""
    import contextlib

    from simspec.measure.validate import ValidateRequest
    from simspec.sim.run import validate_simulated

    result = validate_simulated(ValidateRequest(profile=small_profile, baselines=("fsm", aimd)).simulated(),
                                lambda _: contextlib.nullcontext())
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
def test_the_cli_runs_a_baseline_named_in_simspec_plugins(tmp_path, small_profile):
    """A loose module named in $SIMSPEC_PLUGINS is imported before the CLI builds its help: the
    baseline is in ``validate --help`` and ``validate --simulated --baselines`` runs it."""
    (tmp_path / "aimd_plugin.py").write_text("import test_registry\n\ntest_registry.register()\n")
    env = {"SIMSPEC_PLUGINS": "aimd_plugin", "PYTHONPATH": f"{tmp_path}:{ROOT / 'tests'}", "COLUMNS": "400"}
    shown = simspec("validate", "--help", env=env)
    assert "aimd (additive increase, multiplicative decrease of the depth)" in " ".join(
        shown.stdout.replace("│", " ").split()), shown.stderr
    run = simspec("validate", "--simulated", "--profile", small_profile, "--baselines", "eagle3,aimd", "--json",
                  env=env)
    assert run.returncode == 0, run.stderr
    assert [r["method"].split("(")[0] for r in last_json(run)["rows"]] == ["eagle3", "aimd"]
    missing = simspec("validate", "--help", env={**env, "SIMSPEC_PLUGINS": "no_such_plugin"})
    assert missing.returncode == 0 and "$SIMSPEC_PLUGINS names 'no_such_plugin', which does not import" in \
        missing.stderr, missing.stderr


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


def test_every_mdp_keeps_the_declared_contract():
    from simspec.sim.envs import MDPS, make_mdp
    from simspec.sim.mdp import BatchedMDP
    from simspec.sim.profile import load_profile

    profile = load_profile(PROFILE)
    rows = np.arange(3)
    for name in MDPS:
        mdp = make_mdp(name, profile.traces(), profile.cost, 3)
        assert isinstance(mdp, BatchedMDP), name
        assert mdp.reset(rows).shape == (3, mdp.obs_dim), name
        reward, done = mdp.step(np.zeros(3, dtype=np.int64))
        assert reward.shape == done.shape == (3,) and done.dtype == bool, name


def test_learned_algorithms_come_from_one_registry():
    """Inference (policy folders, --algo's help) and training name the same algorithms; an
    unknown one is one line."""
    from simspec.policies.algorithms import algo_names, algos_help, learned
    from simspec.train.trainers import TRAINERS

    assert algo_names() == TRAINERS.names() == ("ltd", "resps", "radar")
    assert algos_help() == ("ltd (depth + size PPO, co-adapted), resps (cached tree budget, PPO) or radar (LSTM "
                            "continue/stop, offline REINFORCE).")
    with pytest.raises(SimspecError, match=r"^unknown --algo 'dqn': choose from ltd, resps, radar$"):
        learned("dqn")


def test_draft_help_lists_every_format_with_the_fallback_last():
    from simspec.engine.formats import DRAFTER_FORMATS, draft_help

    assert draft_help().endswith(", or a model directory / .gguf sharing the target's tokenizer.")
    assert all(f.help in draft_help() for f in DRAFTER_FORMATS.specs())
    assert [f.name for f in DRAFTER_FORMATS.specs() if f.fallback] == ["causal-lm"]


@pytest.mark.model
def test_an_outside_drafter_format_loads_through_load_drafter(target):
    from simspec.engine.drafter import CausalLMDrafter, truncated_target
    from simspec.engine.formats import DRAFTER_FORMATS, register_drafter_format
    from simspec.engine.load import load_drafter

    @register_drafter_format("first-layers", help="'first-layers' (the target's first two layers)",
                             match_ref=lambda ref: ref == "first-layers")
    def first_layers(source, target):
        return CausalLMDrafter(truncated_target(target, 2), source.ref)

    try:
        drafter = load_drafter("first-layers", target)
        assert drafter.name == "first-layers" and drafter.target_layers() is None
    finally:
        DRAFTER_FORMATS.remove("first-layers")
