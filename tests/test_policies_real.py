"""One policy object, two drivers: the real engine's cycle and the simulator's replay make the
same decisions and see the same acceptances, on traces recorded from the same models: the tiny
6-layer Llama (conftest.py) and its first four layers as the draft LM, which accepts 0-4 tokens a
cycle (the equality under test needs no trained pair; the shipped pair's replay is held to the
engine by ``calibrate``'s replay check and the demo's validation, test_calibrate.py and
test_validate_real.py)."""

from __future__ import annotations

import pytest
from helpers import random_ltd, random_radar, random_resps

from simspec.engine.drafter import CausalLMDrafter, truncated_target
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
PROMPTS = [[1, 5, 7, 3, 11], [8, 2, 2, 6, 13, 1, 0, 5, 19, 3]]


@pytest.fixture(scope="module")
def recorded(tiny):
    drafter = CausalLMDrafter(truncated_target(tiny, 4), "lm")
    recorder = TraceRecorder(tiny, drafter, RecordSpec(depth_max=8, width=4, max_new_tokens=MAX_NEW))
    continuations = recorder.continuations(PROMPTS)
    traces = assemble([recorder.record(i, c) for i, c in zip(PROMPTS, continuations)], PROMPTS,
                      {"depth_max": 8, "width": 4, "prompt_ids": ["a", "b"]})
    engine = SpeculativeEngine(tiny, drafter)
    accepted = [c.accepted for p in PROMPTS for c in engine.generate(p, StaticPolicy(5, 4, 12), MAX_NEW).cycles]
    assert min(accepted) == 0 and max(accepted) >= 3  # rejected drafts and long accepted paths: decisions to make
    return engine, PROMPTS, traces, [engine.greedy(i, MAX_NEW).tokens for i in PROMPTS]


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
