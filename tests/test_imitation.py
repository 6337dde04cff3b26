"""The information bound's pieces: the oracle's cycles followed forward, and the examples an
imitating policy learns from."""

from __future__ import annotations

import numpy as np
from helpers import cost_model, random_traces

from simspec.sim.imitation import Imitation, imitation_examples, oracle_cycles
from simspec.sim.replay import replay


def test_following_the_oracles_choices_costs_exactly_the_oracles_time():
    traces, cost = random_traces(3), cost_model()
    cycles = oracle_cycles(traces, cost)
    seconds = cost.cycle(cycles.depth, traces.width, cycles.size, traces.context_length[cycles.at], cycles.committed)
    prompt = np.searchsorted(traces.prompt_offsets, cycles.at, side="right") - 1
    assert np.allclose(np.bincount(prompt, weights=seconds, minlength=traces.n_prompts), cycles.seconds)
    # each cycle starts where the last one's tokens end, and commits its accepted drafts + 1
    same = prompt[1:] == prompt[:-1]
    assert (cycles.at[1:][same] == cycles.at[:-1][same] + cycles.accepted[:-1][same] + 1).all()
    assert (cycles.committed[1:][same] == cycles.accepted[:-1][same] + 1).all()


def test_imitation_learns_continue_where_the_oracle_drafted_deeper_and_keep_within_its_size():
    traces, cost = random_traces(4), cost_model()
    cycles = oracle_cycles(traces, cost)
    (xs, ys), (xn, yn) = imitation_examples(traces, cycles)
    deep = cycles.depth[cycles.depth >= 2]
    # one stop decision per drafted level below the oracle's depth (the engine asks while depth < the plan)
    assert len(ys) == int(np.minimum(deep, traces.depth_max - 1).sum() - len(deep))
    assert ys.sum() == int((np.minimum(deep, traces.depth_max) - 2).sum())  # continue: below the oracle's depth
    # a node is kept when the oracle's V reaches it: at most V - 1 per cycle, the tree permitting
    assert 0 < yn.sum() <= int((cycles.size[cycles.depth >= 2] - 1).sum())
    assert xs.shape[1] == 8 and xn.shape[1] == 4


def test_an_imitating_policy_replays_like_any_other():
    from simspec.policies.stopping import AcceptancePredictor

    traces, cost = random_traces(5), cost_model()
    policy = Imitation(AcceptancePredictor.random(features=8), AcceptancePredictor.random(features=4),
                       traces.width, traces.depth_max, (0.5, 0.5))
    result = replay(traces, cost, policy)
    assert (result.tokens > 0).all() and (result.speedup > 0).all()
