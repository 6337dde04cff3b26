"""The real engine on the real demo target (and, for drafters whose acceptance any target shows,
on a tiny one with its tokenizer): lossless for every tree shape and drafter."""

from __future__ import annotations

import numpy as np
import pytest

from simspec.engine.load import load_drafter
from simspec.engine.lossless import compare
from simspec.engine.speculative import SpeculativeEngine
from simspec.errors import SimspecError
from simspec.policies import StaticPolicy, tree_capacity

pytestmark = pytest.mark.model  # every test here runs a model

MAX_NEW = 16
# Degenerate and ordinary shapes: plain decoding, chains, wide-shallow, EAGLE-3's default,
# deep-and-huge, and a tree verified at its root only.
SHAPES = [(1, 1, 1), (3, 1, 8), (3, 4, 8), (8, 10, 60), (12, 4, 240), (5, 10, 1)]


@pytest.fixture(scope="module")
def greedy_outputs(target, prompt_ids):
    engine = SpeculativeEngine(target, load_drafter("target-layers:4", target))
    return {pid: engine.greedy(ids, MAX_NEW).tokens for pid, ids in prompt_ids}


def assert_lossless(target, ids, spec_tokens, greedy_tokens):
    divergence = compare(target, ids, spec_tokens, greedy_tokens)
    # Only a float-order near-tie may split the two; anything else is a bug.
    assert divergence is None or divergence.near_tie, divergence.describe()


# Each drafter gives a different acceptance pattern (none, partial, full), hence different
# accepted paths and cache trimming. On the demo target the shipped EAGLE-3 head (real partial
# acceptance) runs every shape on a HumanEval prompt (0) and a ShareGPT one (1); the stand-ins run
# every shape on the tiny random target that shares the demo tokenizer (conftest.py), where they
# show the same patterns (0-2 tokens a cycle for its first 3 of 4 layers, up to 9 for the target
# itself, none for a random LM) at a few percent of the cost: on the demo target, its first 4
# layers took 51 s for one prompt's six shapes.
DRAFT_CASES = {  # case: (drafter, target, prompt)
    "eagle-humaneval": ("eagle", "demo", 0),
    "eagle-sharegpt": ("eagle", "demo", 1),
    "target-layers:3": ("target-layers:3", "tiny", 1),
    "target": ("target", "tiny", 0),
    "random": ("random", "tiny", 1),
}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.long(seconds=20)) if DRAFT_CASES[c][1] == "demo"
                                  else c for c in DRAFT_CASES])
def test_lossless_across_shapes_and_drafters(case, request, prompt_ids, random_drafter):
    draft, which, prompt = DRAFT_CASES[case]
    model = request.getfixturevalue("target" if which == "demo" else "tiny_target")  # the demo's only where it runs
    engine = SpeculativeEngine(model, random_drafter if draft == "random" else load_drafter(draft, model))
    pid, ids = prompt_ids[::2][prompt]
    greedy = request.getfixturevalue("greedy_outputs")[pid] if which == "demo" else engine.greedy(ids, MAX_NEW).tokens
    for depth, width, size in SHAPES:
        out = engine.generate(ids, StaticPolicy(depth, width, size), MAX_NEW)
        assert_lossless(model, ids, out.tokens, greedy)


class TopK(StaticPolicy):
    """EAGLE-3's default tree, each verified node keeping only its ``k`` best children (Re-SpS's top-k)."""

    def __init__(self, k: int) -> None:
        super().__init__(8, 10, 60)
        self.k = k

    def children_batch(self, rows):
        return np.full(len(rows), self.k)


def test_trees_pruned_to_each_nodes_top_k_are_lossless_and_smaller(target, prompt_ids, greedy_outputs):
    engine = SpeculativeEngine(target, load_drafter("eagle", target))
    pid, ids = prompt_ids[0]
    for k in (1, 3):
        out = engine.generate(ids, TopK(k), MAX_NEW)
        assert_lossless(target, ids, out.tokens, greedy_outputs[pid])
        assert max(c.size for c in out.cycles) <= (8 if k == 1 else 60) and min(c.size for c in out.cycles) < 60


def test_draft_equal_to_target_accepts_everything(target, prompt_ids, greedy_outputs):
    # A chain (W=1) drafted by the target is the target's greedy path. (With W > 1 the beam
    # keeps the best *cumulative* scores, which may drop the greedy path: EAGLE-2 behaviour.)
    engine = SpeculativeEngine(target, load_drafter("target", target))
    depth, width = 5, 1
    pid, ids = prompt_ids[2]
    out = engine.generate(ids, StaticPolicy(depth, width, tree_capacity(depth, width)), MAX_NEW)
    assert_lossless(target, ids, out.tokens, greedy_outputs[pid])
    full = [c.accepted == depth - 1 for c in out.cycles[:-1]]  # the last cycle may stop early at EOS
    assert np.mean(full) >= 0.9
    assert out.tau > 3.5


def test_random_draft_accepts_nothing(target, prompt_ids, random_drafter, greedy_outputs):
    pid, ids = prompt_ids[3]
    out = SpeculativeEngine(target, random_drafter).generate(ids, StaticPolicy(4, 4, 16), MAX_NEW)
    assert_lossless(target, ids, out.tokens, greedy_outputs[pid])
    assert sum(c.accepted for c in out.cycles) <= 1


def test_truncated_target_accepts_partially(target, prompt_ids):
    engine = SpeculativeEngine(target, load_drafter("target-layers:16", target))
    accepted = [c.accepted for _, ids in prompt_ids[:2]
                for c in engine.generate(ids, StaticPolicy(6, 4, 30), MAX_NEW).cycles]
    assert 0 < np.mean(accepted) < 5


class Recorder(StaticPolicy):
    """Static (D, W, V) that records what the batch hooks saw (a batch of one row)."""

    def __init__(self, depth, width, size):
        super().__init__(depth, width, size)
        self.steps, self.trees, self.outcomes = [], [], []

    def keep_drafting_batch(self, rows, depth, frontier, planned):
        self.steps.append((int(depth[0]), int(np.isfinite(frontier[0]).sum())))
        return depth < planned

    def choose_size_batch(self, rows, depth, tree_scores, planned):
        self.trees.append((int(depth[0]), 1 + int(np.isfinite(tree_scores[0]).sum())))
        return planned

    def observe_batch(self, rows, depth, size, accepted):
        self.outcomes.extend(accepted.tolist())


def test_hooks_see_ltd_shaped_trees(tiny_target, prompt_ids):
    depth, width = 5, 4
    policy = Recorder(depth, width, 60)
    engine = SpeculativeEngine(tiny_target, load_drafter("target-layers:2", tiny_target))
    out = engine.generate(prompt_ids[0][1], policy, 12)
    assert policy.trees and all(t == (depth, tree_capacity(depth, width)) for t in policy.trees)
    # after the first draft step the frontier holds W candidates, after later ones W**2
    assert policy.steps[:3] == [(2, width), (3, width**2), (4, width**2)]
    assert policy.outcomes == [c.accepted for c in out.cycles]
    capacity = tree_capacity(depth, width)  # 53 < 60: the engine caps V at the tree's size
    assert all(c.size == capacity and c.depth == depth and c.draft_calls == depth - 1 for c in out.cycles)


class StopEarly(StaticPolicy):
    """Stops after the first draft step and verifies 2 nodes: the hooks really steer."""

    def keep_drafting_batch(self, rows, depth, frontier, planned):
        return np.zeros(len(rows), dtype=bool)

    def choose_size_batch(self, rows, depth, tree_scores, planned):
        return np.full(len(rows), 2)


def test_policy_hooks_steer_the_cycle(target, prompt_ids, greedy_outputs):
    pid, ids = prompt_ids[1]
    out = SpeculativeEngine(target, load_drafter("target", target)).generate(ids, StopEarly(8, 4, 60), MAX_NEW)
    assert all(c.depth == 2 and c.size == 2 and c.draft_calls == 1 for c in out.cycles)
    assert_lossless(target, ids, out.tokens, greedy_outputs[pid])


def test_bookkeeping_is_small_at_eagle3_default(target, prompt_ids):
    engine = SpeculativeEngine(target, load_drafter("target-layers:4", target))
    cycles = engine.generate(prompt_ids[0][1], StaticPolicy(8, 10, 60), MAX_NEW).cycles
    total = sum(c.draft_s + c.verify_s + c.policy_s + c.bookkeeping_s for c in cycles)
    share = sum(c.bookkeeping_s for c in cycles) / total
    assert share <= 0.15, f"bookkeeping {share:.1%} of cycle time"


def test_prompt_longer_than_context_is_refused(target):
    engine = SpeculativeEngine(target, load_drafter("target-layers:2", target))
    with pytest.raises(SimspecError, match="exceeds the target's context"):
        engine.generate([1] * 8190, StaticPolicy(3, 2, 4), 16)
    with pytest.raises(SimspecError, match="empty prompt"):
        engine.greedy([], 4)
