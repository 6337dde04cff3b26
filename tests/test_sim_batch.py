"""Replay at batch size B (``simspec.sim.replay``) models the batched engine's rules: on traces
recorded from a tiny real Llama and its draft LM, the replayed queue runs the engine's cycles
(count, idle rows, draft forwards, tokens per prompt) for a static, a depth-adaptive and an
online-learning policy at several batch sizes; its time is the batch's curves at the cycle's
maxima."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import TINY_VOCAB

from simspec.policies.base import StaticPolicy
from simspec.policies.baselines import DDD, QLearning
from simspec.sim.costmodel import CostModel, Point
from simspec.sim.replay import replay

TOKENS = 20


def _cost(batches=(1, 2, 3)) -> CostModel:
    """Verify grows with V and B, drafting with W and B; a plain step costs less than a verify of
    one token (no tree to mask), so that a test sees which of the two priced a cycle."""
    points = []
    for b in batches:
        for c in (8, 128):
            points += [Point("verify", n, c, 0.05 * (1 + 0.2 * (b - 1)) + 1e-3 * n * b, b) for n in (1, 8, 64)]
            points += [Point("draft", n, c, 0.004 * (1 + 0.1 * (b - 1)) + 1e-4 * n * b, b) for n in (1, 4, 16)]
            points += [Point("greedy", 1, c, 0.05 * (1 + 0.2 * (b - 1)) + 0.5e-3 * b, b)]
    return CostModel(points)


@pytest.fixture(scope="module")
def recorded(tiny):
    from simspec.engine.drafter import CausalLMDrafter, truncated_target
    from simspec.measure.recorder import RecordSpec, TraceRecorder
    from simspec.sim.traces import assemble

    drafter = CausalLMDrafter(truncated_target(tiny, 5), "lm5")
    rng = np.random.default_rng(3)
    prompts = [[int(x) for x in rng.integers(0, TINY_VOCAB, size=int(rng.integers(3, 16)))] for _ in range(5)]
    recorder = TraceRecorder(tiny, drafter, RecordSpec(depth_max=6, width=2, max_new_tokens=TOKENS))
    continuations = recorder.continuations(prompts)
    traces = assemble([recorder.record(p, c) for p, c in zip(prompts, continuations)], prompts,
                      {"depth_max": 6, "width": 2, "prompt_ids": [f"p{i}" for i in range(5)]})
    return drafter, prompts, traces


class Alternating(StaticPolicy):
    """A static tree every other cycle, and no drafting between (as a server switching
    speculation off and on): the engine runs those cycles as plain steps, and the drafter is
    fed their tokens at its next draft."""

    def reset_batch(self, n):
        self.calls = 0

    def plan_batch(self, rows, context):
        self.calls += 1
        depth, size = super().plan_batch(rows, context)
        return (depth, size) if self.calls % 2 else (np.ones_like(depth), np.ones_like(size))


# a static tree, a depth rule that stops on the frontier's scores, an online learner that draws
# random numbers, and a tree switched off every other cycle: one policy object asked for every
# busy row at once, on both sides
POLICIES = {"static": lambda: StaticPolicy(4, 2, 6), "ddd": lambda: DDD(0.4, width=2, max_depth=6, size=8),
            "qlearn": lambda: QLearning(_cost(), width=2, max_depth=6, size=8, epsilon=0.3),
            "alternating": lambda: Alternating(4, 2, 6)}


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("name", list(POLICIES))
def test_the_replayed_queue_runs_the_engines_cycles(tiny, recorded, name, batch):
    from simspec.engine.speculative import SpeculativeEngine

    drafter, prompts, traces = recorded
    run = SpeculativeEngine(tiny, drafter, batch_size=batch).decode(prompts, POLICIES[name](), TOKENS)
    # the queue three times in one replay, as passes and draws are replayed: each as the engine runs it
    # (a sequence's exploration draws are its own, wherever it sits in the replay)
    queues = np.tile(np.arange(len(prompts)), (3, 1))
    sim = replay(traces, _cost(), POLICIES[name](), TOKENS, prompts=queues, batch=batch)
    assert sim.cycles.tolist() == [run.cycles] * 3 and sim.idle_row_cycles.tolist() == [run.idle_row_cycles] * 3
    assert sim.tokens.tolist() == [len(g.tokens) - 1 for g in run.generations] * 3
    assert sim.draft_calls.tolist() == [run.draft_forwards] * 3
    plain = SpeculativeEngine(tiny, drafter, batch_size=batch).decode(prompts, None, TOKENS)
    assert sim.plain_cycles.tolist() == [plain.cycles] * 3
    assert [g.tokens for g in run.generations] == [g.tokens for g in plain.generations]
    if name == "alternating":  # half its cycles are plain steps, priced as plain decoding's
        assert sum(c.depth.max() == 1 for c in run.batch_cycles) == run.cycles // 2


def test_a_cycle_costs_the_batch_curves_at_its_largest_tree_and_longest_context(recorded):
    _, _, traces = recorded
    cost = _cost()
    one = replay(traces, cost, StaticPolicy(4, 2, 6), TOKENS, batch=1)
    three = replay(traces, cost, StaticPolicy(4, 2, 6), TOKENS, batch=3)
    assert three.seconds.sum() < one.seconds.sum() and three.greedy_seconds.sum() < one.greedy_seconds.sum()
    assert one.tokens.tolist() == three.tokens.tolist()
    with pytest.raises(Exception, match="no curves at batch size 4"):
        replay(traces, cost, StaticPolicy(4, 2, 6), TOKENS, batch=4)


def test_a_draft_level_costs_the_step_at_the_rows_still_drafting(recorded):
    """The engine's draft forward pads over every row, but scores only those still drafting: a
    level after some rows stopped (a depth rule's early stop, or a finished row at the queue's
    tail) costs the profile's step at that many rows, where it has them."""
    _, _, traces = recorded
    cost = _cost()
    at_three = cost.at_batch(3)

    def with_rows(factor):  # batch 3's draft step with 1 and 2 of its rows drafting
        return CostModel(cost._points + [Point("draft", n, c, factor * float(at_three.draft(n, c)), 3, rows)
                                         for rows in (1, 2) for c in (8, 128) for n in (1, 4, 16)])

    saved = {}
    for name in ("static", "ddd"):
        full = replay(traces, cost, POLICIES[name](), TOKENS, batch=3)
        assert replay(traces, with_rows(1.0), POLICIES[name](), TOKENS, batch=3).seconds == pytest.approx(full.seconds)
        cheaper = replay(traces, with_rows(0.5), POLICIES[name](), TOKENS, batch=3)
        assert cheaper.cycles == full.cycles and cheaper.greedy_seconds == full.greedy_seconds
        saved[name] = float(1 - cheaper.seconds[0] / full.seconds[0])
    assert 0 < saved["static"] < saved["ddd"]  # the static tree's rows stop together, but for the tail


@pytest.mark.parametrize("name", ["static", "ddd", "alternating"])
def test_the_drift_meter_prices_the_engines_batch_cycles_as_replay_does(tiny, recorded, name):
    """The in-situ refit at batch B holds each live batched cycle against the curves at B: the
    shapes the engine logs (every row's depth and size, the longest context, the nodes the first
    level feeds) priced by the meter must add up to the replay's time for the same queue, or
    the refit's ratios would compare the engine with another cycle than the one replay prices."""
    from simspec.engine.speculative import SpeculativeEngine
    from simspec.measure.interleave import DriftMeter

    drafter, prompts, traces = recorded
    cost = _cost()
    engine = SpeculativeEngine(tiny, drafter, batch_size=3)
    meter, plain_meter = DriftMeter(cost.at_batch(3), 2), DriftMeter(cost.at_batch(3), 2)
    meter.batch(engine.decode(prompts, POLICIES[name](), TOKENS), plain=False)
    plain_meter.batch(engine.decode(prompts, None, TOKENS), plain=True)
    sim = replay(traces, cost, POLICIES[name](), TOKENS, batch=3)
    prefill = sim.prefill_seconds[0]
    assert sum(meter.predicted.values()) == pytest.approx(sim.seconds[0] + prefill, rel=1e-9)
    assert sum(plain_meter.predicted.values()) == pytest.approx(sim.greedy_seconds[0] + prefill, rel=1e-9)
    assert meter.predicted["draft"] > 0 and meter.predicted["bookkeeping"] == 0  # _cost() has no bookkeeping
