"""What the simulator charges for a policy's decisions: each cycle at its own tree depth
(``simspec.sim.charge``), from decision times measured at a few depths (``policy_latency_by_depth``)."""

from __future__ import annotations

import numpy as np
from helpers import DEPTH_MAX, ROOT, cost_model, random_traces

from simspec.policies import StaticPolicy
from simspec.policies.registry import timing_policies
from simspec.policies.timing import policy_latency_by_depth, timing_depths
from simspec.sim.charge import DecisionCharge
from simspec.sim.evaluate import decision_charges
from simspec.sim.profile import load_profile
from simspec.sim.replay import replay

CHARGE = DecisionCharge((2, 6), (1e-3, 5e-3))


def test_a_cycle_is_charged_its_decisions_at_its_own_depth():
    traces, cost = random_traces(0), cost_model()
    assert CHARGE(1) == 1e-3 and CHARGE(4) == 3e-3 and CHARGE(12) == 5e-3  # flat beyond the depths timed
    for depth in (2, 3, 5):
        policy = StaticPolicy(depth, traces.width, depth + 1)
        charged, free = replay(traces, cost, policy, None, CHARGE), replay(traces, cost, policy, None, 0.0)
        assert np.allclose(charged.decision_seconds, charged.cycles * CHARGE(depth))
        assert np.allclose(charged.seconds - free.seconds, charged.decision_seconds)
        queued = replay(traces, cost, policy, None, CHARGE, prompts=np.arange(traces.n_prompts)[None, :])
        assert np.isclose(queued.decision_seconds, queued.cycles * CHARGE(depth))  # one queue through one row
    flat = replay(traces, cost, StaticPolicy(3, traces.width, 4), None, 5e-3)  # a float: every cycle alike
    assert np.allclose(flat.decision_seconds, flat.cycles * 5e-3)


def test_a_profile_charges_by_depth_where_it_timed_by_depth():
    meta = load_profile(ROOT / "calibration" / "cpu-demo").meta.with_(
        policy_seconds={"static": 1e-5, "svip": 4e-3, "fsm": 2e-4},
        policy_seconds_by_depth={"svip": {"2": 1e-4, "12": 4e-3}})
    charges = decision_charges(meta)
    assert charges["svip"](2) == 1e-4 and charges["svip"](12) == 4e-3  # by depth, over the flat entry
    assert charges["fsm"](2) == charges["fsm"](12) == 2e-4  # timed at one depth: flat
    assert charges["vllm-schedule"](5) == 1e-5  # charged as a static tree


def test_a_rule_that_weighs_every_level_costs_more_the_deeper_it_drafts():
    """Measured: the Bayes rule scores each drafted level's nodes, so timing it at the deepest
    tree alone would overcharge the cycles that stop early."""
    # Five timings, each depth's median: one timing's deep/shallow ratio runs from 1.5 to 6 on a
    # loaded 2-core machine (median near 2.7), and fell to 1.3 once in a whole serial run.
    policies = timing_policies(cost_model(), 2, DEPTH_MAX)
    runs = [policy_latency_by_depth({"bayes": policies["bayes"]}, 2, DEPTH_MAX, 20)["bayes"] for _ in range(5)]
    assert list(runs[0]) == [str(d) for d in timing_depths(DEPTH_MAX)] == ["2", "4", "6"]
    deep, shallow = (np.median([t[d] for t in runs]) for d in ("6", "2"))
    assert deep > 1.5 * shallow > 0
