"""One policy object, two drivers: the real engine's cycle and the simulator's replay make the
same decisions and see the same acceptances, on traces recorded from the same models."""

from __future__ import annotations

import pytest
from helpers import random_ltd, random_radar, random_resps

from simspec.engine.load import load_drafter
from simspec.engine.speculative import SpeculativeEngine
from simspec.measure.recorder import RecordSpec, TraceRecorder
from simspec.policies import StaticPolicy
from simspec.policies.baselines import (
    DDD,
    FSM,
    SVIP,
    AnalyticWindow,
    GammaTune,
    PaperQLearning,
    QLearning,
    TokenCacheFSM,
)
from simspec.policies.stopping import AcceptancePredictor, DiscoStop, SpecDecPP
from simspec.sim.costmodel import CostModel, Point
from simspec.sim.replay import replay
from simspec.sim.traces import assemble

pytestmark = pytest.mark.model

MAX_NEW = 24


@pytest.fixture(scope="module")
def recorded(target, prompt_ids):
    drafter = load_drafter("eagle", target)
    recorder = TraceRecorder(target, drafter, RecordSpec(depth_max=8, width=4, max_new_tokens=MAX_NEW))
    chosen = prompt_ids[1:3]  # a HumanEval prompt and a ShareGPT one
    ids = [ids for _, ids in chosen]
    continuations = recorder.continuations(ids)
    traces = assemble([recorder.record(i, c) for i, c in zip(ids, continuations)], ids,
                      {"depth_max": 8, "width": 4, "prompt_ids": [p for p, _ in chosen]})
    engine = SpeculativeEngine(target, drafter)
    return engine, ids, traces, [engine.greedy(i, MAX_NEW).tokens for i in ids]


def _cost():
    return CostModel([Point("verify", n, c, 0.06 + 1e-3 * n) for c in (64, 512) for n in (1, 8, 64)]
                     + [Point("draft", n, c, 0.005 + 1e-4 * n) for c in (64, 512) for n in (1, 4, 16)])


POLICIES = {
    "static": lambda: StaticPolicy(5, 4, 12),
    "ddd": lambda: DDD(0.3, width=4, max_depth=8, size=16),
    "svip": lambda: SVIP(1.5, width=4, max_depth=8, size=16),
    "gammatune": lambda: GammaTune(0.5, width=4, max_depth=8, size=16),
    "fsm": lambda: FSM(width=4, max_depth=8, size=16),
    "cachefsm": lambda: FSM(width=4, max_depth=8, size=16, patience=2),
    "analytic": lambda: AnalyticWindow(_cost(), width=4, max_depth=8, size=16),
    "qlearn": lambda: QLearning(_cost(), width=4, max_depth=8, size=16, epsilon=0.3),
    "cachefsm-token": lambda: TokenCacheFSM(width=4, max_depth=8, size=16),
    "qlearn-paper": lambda: PaperQLearning(_cost(), width=4, max_depth=8, size=16, epsilon=0.3),
    # Random classifiers: decisions that depend on every feature, the same in both drivers.
    "specdecpp": lambda: SpecDecPP(AcceptancePredictor.random(seed=1), 0.6, width=4, max_depth=8, size=16),
    "disco": lambda: DiscoStop(AcceptancePredictor.random(seed=2), 0.45, width=4, max_depth=8, size=16),
    # Learned policies with random networks: numpy inference, the same in both drivers.
    "ltd": lambda: random_ltd(4, 8, seed=3),
    "resps": lambda: random_resps(4, 8, hold=3),
    "radar": lambda: random_radar(4, 8),
}


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_same_policy_same_cycles_in_engine_and_replay(recorded, name):
    engine, ids, traces, greedy = recorded
    simulated = replay(traces, _cost(), POLICIES[name](), MAX_NEW)  # every prompt at once, as validate replays them
    for i, prompt in enumerate(ids):
        live = engine.generate(prompt, POLICIES[name](), MAX_NEW)
        assert live.tokens == greedy[i], f"{name}: speculative output differs from plain greedy decoding"
        assert len(live.cycles) == simulated.cycles[i], name
        assert sum(c.draft_calls for c in live.cycles) == simulated.draft_calls[i], name
        assert len(live.tokens) - 1 == simulated.tokens[i], name
