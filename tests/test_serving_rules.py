"""The serving engines' own rules as baselines (``simspec.policies.rules.serving``): SGLang's
adaptive draft steps follow its code's ladder, warm-up, interval and hysteresis, per batch size;
vLLM's schedule takes the K of its batch range; both tune and replay in the simulator and decode
losslessly on the real engine, alone and in batches."""

from __future__ import annotations

import numpy as np
import pytest

from simspec.policies.rules.serving import (
    SGLANG_BANDS,
    ChainSchedule,
    DraftLenSchedule,
    QueueAware,
    SGLangAdaptive,
)

ROW = np.zeros(1, dtype=np.int64)


def test_sglang_adaptive_climbs_the_ladder_when_drafts_are_accepted_and_falls_when_not():
    policy = SGLangAdaptive(SGLANG_BANDS, 4, 12)
    policy.batch_size = 1
    policy.reset_batch(1)
    # Every draft accepted for 25 verifies, then none. The average starts at steps - 1 = 0 and
    # moves 0.2 of the way per verify; decisions come after verifies 15, 20, 25, ... only.
    history: list[int] = []
    for verify in range(40):
        depth, _ = policy.plan_batch(ROW, np.zeros(1))
        history.append(int(depth[0]) - 1)
        policy.observe_batch(ROW, depth, depth, np.array([history[-1] if verify < 25 else 0]))
    assert history[:15] == [1] * 15  # warm-up and the first interval: no move even at full acceptance
    # after verify 15 (average 0.96 > 1 - 0.5) one rung up; after 20 (2.33 <= 3 - 0.5) none; after 25 up
    assert history[15:25] == [3] * 10 and history[25:30] == [7] * 5
    # none accepted: after verify 30 the average (0.91) is under 3 - 0.5 - 0.25, not under 1 - 0.75:
    # one rung down; after 35 (0.30) it stays; after 40 it would fall to 1
    assert history[30:40] == [3] * 10


def test_sglang_adaptive_reads_its_band_from_the_batch_size_and_shares_one_average_in_a_batch():
    policy = SGLangAdaptive(SGLANG_BANDS, 4, 12)
    policy.batch_size = 64  # SGLang's largest band: speculation off
    policy.reset_batch(5)
    rows = np.arange(5)
    for _ in range(30):
        depth, size = policy.plan_batch(rows, np.zeros(5))
        assert (depth == 1).all() and (size == 1).all()
        policy.observe_batch(rows, depth, size, np.zeros(5, dtype=np.int64))
    policy.batch_size = 8  # ladder 0, 1, 3: starts off, probes 1 at the first decision
    policy.reset_batch(5)
    planned = []
    for verify in range(20):
        busy = rows[: 5 - verify % 2]  # rows come and go; the batch still has one state
        depth, size = policy.plan_batch(busy, np.zeros(len(busy)))
        assert len(set(depth.tolist())) == 1
        planned.append(int(depth[0]) - 1)
        policy.observe_batch(busy, depth, size, depth - 1)
    assert planned[:15] == [0] * 15 and planned[15:] == [1] * 5


def test_vllm_schedule_takes_the_k_of_its_batch_range():
    policy = ChainSchedule(((1, 1, 4), (2, 7, 2), (8, 31, 0)), 4)
    for batch, k in ((1, 4), (2, 2), (7, 2), (8, 0), (200, 0)):
        policy.batch_size = batch
        depth, size = policy.plan_batch(np.arange(3), np.zeros(3))
        assert (depth == k + 1).all() and (size == k + 1).all(), batch


def test_trtllm_drafts_the_length_scheduled_for_its_batch_and_none_past_the_schedule():
    policy = DraftLenSchedule({4: 3, 8: 2}, 4, depth_max=8)
    for batch, k in ((1, 3), (4, 3), (5, 2), (8, 2), (9, 0), (64, 0)):
        policy.batch_size = batch
        policy.reset_batch(3)
        depth, size = policy.plan_batch(np.arange(3), np.zeros(3))
        assert (depth == k + 1).all() and (size == k + 1).all(), batch


def test_trtllm_switches_speculation_off_for_good_below_its_acceptance_rate():
    """A server's iterations accepting 1 of 3 drafts: once the window's rate (1/3) is under the
    threshold speculation stops and stays off; at a threshold under it, it goes on."""
    for threshold, off in ((0.5, True), (0.3, False)):
        policy = DraftLenSchedule({8: 3}, 4, depth_max=8, threshold=threshold, window=4)
        policy.batch_size = 4
        policy.reset_batch(4)
        rows = np.arange(4)
        for i in range(10):
            depth, size = policy.plan_batch(rows, np.zeros(4))
            if off and i >= 4:
                assert (depth == 1).all(), i  # no drafting: the last 4 iterations accepted 1/3
            policy.observe_batch(rows, depth, size, np.where(depth > 1, 1, 0))
        assert bool(policy.off[0]) is off


def test_trtllm_switches_off_as_a_stream_fills_the_batch():
    """Under load the rule drafts while at most 2 rows are busy and verifies plain steps once
    more are: at a saturating rate most cycles draft nothing, at a light one most draft."""
    from helpers import random_traces
    from test_load import batched_cost

    from simspec.sim.load import replay_load
    from simspec.sim.stream import poisson

    traces, cost = random_traces(11), batched_cost()

    def drafting_share(rate: float) -> float:
        policy = DraftLenSchedule({2: 3}, 2, depth_max=6)
        seen = []
        plan = policy.plan_batch

        def planned(rows, context):
            depths, sizes = plan(rows, context)
            seen.append(depths[0] > 1)
            return depths, sizes

        policy.plan_batch = planned
        # 200 s of light arrivals (a few requests); 20 s of saturating ones keep the rows full for minutes
        replay_load(traces, cost, policy, poisson(rate, 200 if rate < 1 else 20, np.arange(traces.n_prompts), seed=3),
                    4, 30)
        return float(np.mean(seen))

    assert drafting_share(0.01) > 0.9 > 0.5 > drafting_share(20.0)


def test_queue_aware_speculates_until_a_request_waits():
    """Requests an hour apart never wait: the rule is its tree, cycle for cycle. Under bursts that
    queue requests it steps plainly while they wait: more, cheaper cycles than its tree's."""
    from helpers import random_traces
    from test_load import batched_cost

    from simspec.policies.base import StaticPolicy
    from simspec.sim.load import replay_load
    from simspec.sim.stream import Stream, bursty

    traces, cost = random_traces(12), batched_cost()
    n = traces.n_prompts
    apart = Stream(np.arange(n) * 3600.0, np.arange(n))
    rule, tree = (replay_load(traces, cost, p, apart, 4, 30) for p in (QueueAware(StaticPolicy(4, 2, 8)),
                                                                        StaticPolicy(4, 2, 8)))
    assert np.array_equal(rule.finished, tree.finished) and rule.cycles == tree.cycles
    burst = bursty(30.0, on_s=2, off_s=20, duration_s=100, prompts=np.arange(n), seed=1)
    rule, tree = (replay_load(traces, cost, p, burst, 4, 30) for p in (QueueAware(StaticPolicy(4, 2, 8)),
                                                                        StaticPolicy(4, 2, 8)))
    assert rule.cycles > tree.cycles  # plain steps while the burst's queue drains


@pytest.mark.parametrize("name", ["sglang-adaptive", "vllm-schedule", "trtllm-schedule", "queue-aware"])
def test_serving_baselines_tune_and_replay_in_the_simulator(name, tmp_path):
    from helpers import simulated_rows

    rows = simulated_rows(tmp_path, name)
    assert rows[1]["method"].startswith(name) and rows[1]["speedup"] > 0 and rows[1]["tau"] >= 1


@pytest.mark.parametrize("batch", [1, 8])
def test_serving_rules_decode_losslessly_alone_and_in_batches(batch, tiny, drafters):
    from helpers import TINY_VOCAB

    from simspec.engine.speculative import SpeculativeEngine

    rng = np.random.default_rng(1)
    prompts = [[int(x) for x in rng.integers(0, TINY_VOCAB, size=int(rng.integers(3, 12)))] for _ in range(3)]
    single = SpeculativeEngine(tiny, drafters["eagle3"])
    reference = [single.greedy(p, 20).tokens for p in prompts]
    for policy in (SGLangAdaptive(SGLANG_BANDS, 3, 8), ChainSchedule(((1, 2, 3), (3, 31, 1)), 3),
                   DraftLenSchedule({4: 3, 8: 1}, 3, 8, threshold=0.3)):
        if batch == 1:
            outputs = [single.generate(p, policy, 20).tokens for p in prompts]
        else:
            run = SpeculativeEngine(tiny, drafters["eagle3"], batch_size=batch).decode(prompts, policy, 20)
            outputs = [g.tokens for g in run.generations]
            drafted = [int(c.depth.max()) - 1 for c in run.batch_cycles]
            # at batch 8, SGLang's ladder 0, 1, 3 starts with no drafting and probes a step at verify 15;
            # vLLM's range 3-31 drafts one, and so does TensorRT-LLM's schedule up to 8 (unless it switched off)
            if isinstance(policy, SGLangAdaptive):
                assert drafted == [0] * 15 + [1] * (len(drafted) - 15), (policy.name, drafted)
            elif isinstance(policy, ChainSchedule):
                assert drafted == [1] * len(drafted), (policy.name, drafted)
            else:
                assert set(drafted) <= {0, 1} and drafted[0] == 1, (policy.name, drafted)
        assert outputs == reference, (policy.name, batch)
