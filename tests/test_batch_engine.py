"""Batched decoding (``simspec.engine.speculative``): B sequences per forward, each with its own
tree, continuous batching from a queue. Every sequence's output equals its own plain greedy
decoding, and each cycle accepts what it accepts decoded alone at batch 1 (the batched drafter
drafts the same trees), on a tiny real Llama with both drafter kinds, and on the demo target."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import TINY_VOCAB

from simspec.engine.kv_rows import RowSlots
from simspec.engine.speculative import SpeculativeEngine
from simspec.errors import SimspecError
from simspec.policies.base import StaticPolicy

SHAPES = [(4, 2, 6), (3, 3, 7), (1, 1, 1), (5, 1, 4)]  # (D, W, V); depth 1 drafts nothing


@pytest.fixture(scope="module")
def prompts():
    rng = np.random.default_rng(0)  # five prompts of 3-19 tokens: more than a batch, uneven lengths
    return [[int(x) for x in rng.integers(0, TINY_VOCAB, size=int(rng.integers(3, 20)))] for _ in range(5)]


@pytest.fixture(scope="module")
def close_lm(tiny):
    """A draft LM of the tiny target's first 5 of 6 layers: it agrees often, so that accepted
    paths are long and often leave the tree's prefix (their keys and values move)."""
    from simspec.engine.drafter import CausalLMDrafter, truncated_target

    return CausalLMDrafter(truncated_target(tiny, 5), "lm5")


def _accepted(generations) -> list[list[int]]:
    return [[c.accepted for c in g.cycles] for g in generations]


@pytest.mark.parametrize("kind, batch", [("lm5", 4), ("eagle3", 3)])
def test_every_sequence_equals_its_plain_greedy_decoding_and_accepts_as_alone(tiny, drafters, close_lm, prompts,
                                                                             kind, batch):
    drafter = close_lm if kind == "lm5" else drafters["eagle3"]
    single = SpeculativeEngine(tiny, drafter)
    reference = [single.greedy(p, 20).tokens for p in prompts]
    engine = SpeculativeEngine(tiny, drafter, batch_size=batch)
    assert [g.tokens for g in engine.decode(prompts, None, 20).generations] == reference
    moved = 0
    for shape in SHAPES:
        run = engine.decode(prompts, StaticPolicy(*shape), 20)
        assert [g.tokens for g in run.generations] == reference, shape
        alone = [single.generate(p, StaticPolicy(*shape), 20) for p in prompts]
        assert _accepted(run.generations) == _accepted(alone), shape
        moved += sum(c.accepted > 0 and shape[1] > 1 for g in alone for c in g.cycles)
    if kind == "lm5":
        assert moved > 10  # the test exercised accepted paths in wide trees


def test_the_queue_refills_rows_and_idles_them_once_it_is_empty(tiny, drafters, prompts):
    engine = SpeculativeEngine(tiny, drafters["eagle3"], batch_size=4)
    budgets = 16
    run = engine.decode(prompts, None, budgets)
    # plain decoding: one token per row per cycle; five sequences of 16 tokens in rows of 4:
    # the first four run 15 cycles, the fifth 15 more, three rows idle throughout those
    assert run.cycles == 30 and run.idle_row_cycles == 45
    assert [len(g.tokens) for g in run.generations] == [budgets] * len(prompts)
    assert run.tokens_per_s > 0 and all(g.prefill_s > 0 for g in run.generations)


def test_a_stream_joins_rows_as_it_arrives_and_decodes_as_alone(tiny, drafters, prompts):
    """Under load (``arrivals``) a request takes a free row only once it has arrived, the engine
    waits when every row is free, and every output is still its plain greedy decoding; with
    every request arriving at once the run is the queue's, cycle for cycle."""
    engine = SpeculativeEngine(tiny, drafters["eagle3"], batch_size=2)
    single = SpeculativeEngine(tiny, drafters["eagle3"])
    reference = [single.greedy(p, 12).tokens for p in prompts]
    policy = StaticPolicy(3, 2, 4)
    at_once = engine.decode(prompts, policy, 12, arrivals=[0.0] * len(prompts))
    queued = engine.decode(prompts, policy, 12)
    assert at_once.cycles == queued.cycles and [g.tokens for g in at_once.generations] == reference
    arrivals = [0.0, 0.0, 0.05, 0.4, 0.4]
    run = engine.decode(prompts, policy, 12, arrivals=arrivals)
    assert [g.tokens for g in run.generations] == reference
    for g, arrived in zip(run.generations, arrivals):
        assert arrived <= g.admitted_at < g.first_token_at < g.finished_at <= run.total_s
    assert run.generations[3].admitted_at >= 0.4  # the engine waited for it
    assert run.total_s > 0.4
    seen = []  # a load-aware policy is told, before each cycle, how many arrived requests wait for a row
    plan = policy.plan_batch
    policy.plan_batch = lambda rows, context: seen.append(policy.waiting) or plan(rows, context)
    engine.decode(prompts, policy, 12, arrivals=[0.0] * len(prompts))
    assert seen[0] == len(prompts) - 2 and seen[-1] == 0 and sorted(seen, reverse=True) == seen


@pytest.mark.parametrize("kind", ["eagle3", "lm5"])
def test_an_idle_row_does_not_widen_the_batch_s_attention(tiny, drafters, close_lm, kind, monkeypatch):
    """Once the queue is empty a finished row idles as padding: every forward's attention must
    read as far as the longest *busy* row (what the batch replay prices), not as far as a
    finished sequence reached. A long prompt beside short ones finishes first and idles while
    the short ones, refilled after it, still decode; outputs stay each one's plain decoding."""
    from simspec.engine.batch_models import TargetRows
    from simspec.engine.drafter import LMRows
    from simspec.engine.eagle import EagleRows

    drafter, rows_class = (close_lm, LMRows) if kind == "lm5" else (drafters["eagle3"], EagleRows)
    rng = np.random.default_rng(1)
    prompts = [[int(x) for x in rng.integers(0, TINY_VOCAB, size=n)] for n in (40, 4, 4)]
    widest = []  # per forward: (keys any row holds, keys the busy rows hold)
    target_forward, draft_root = TargetRows.forward, rows_class.draft_root

    def forward(self, trees):
        widest.append((int(self.lengths.max()), int(self.lengths[list(trees)].max())))
        return target_forward(self, trees)

    def root(self, rows):
        widest.append((int(self.committed.max()), int(self.committed[rows].max())))
        return draft_root(self, rows)

    monkeypatch.setattr(TargetRows, "forward", forward)
    monkeypatch.setattr(rows_class, "draft_root", root)
    engine = SpeculativeEngine(tiny, drafter, batch_size=2)
    single = SpeculativeEngine(tiny, drafter)
    plain = engine.decode(prompts, None, 12)
    run = engine.decode(prompts, StaticPolicy(3, 2, 4), 12)
    assert run.idle_row_cycles > 0 and plain.idle_row_cycles > 0
    assert all(held == busy for held, busy in widest), [w for w in widest if w[0] != w[1]][:3]
    reference = [single.greedy(p, 12).tokens for p in prompts]
    assert [g.tokens for g in plain.generations] == reference == [g.tokens for g in run.generations]


def test_rows_write_at_their_own_lengths_and_keep_their_own_paths():
    slots = RowSlots(batch=2, capacity=8)
    k = torch.arange(2 * 3, dtype=torch.float32).reshape(2, 1, 3, 1)
    slots.begin(np.array([0, 2]))
    keys, _ = slots.append(k, k)
    assert keys.shape == (2, 1, 5, 1)  # up to the furthest write
    assert keys[0, 0, :, 0].tolist() == [0, 1, 2, 0, 0]  # unwritten slots are zero, never garbage
    assert keys[1, 0, :, 0].tolist() == [0, 0, 3, 4, 5]
    slots.keep(1, 2, torch.tensor([0, 2]))  # row 1 keeps its 1st and 3rd new token
    assert slots.keys[1, 0, 2:4, 0].tolist() == [3, 5]
    slots.begin(1, row=0)  # one row alone (a prefill)
    keys, _ = slots.append(torch.full((1, 1, 2, 1), 9.0), torch.zeros(1, 1, 2, 1))
    assert keys.shape == (1, 1, 3, 1) and slots.keys[0, 0, :4, 0].tolist() == [0, 9, 9, 0]
    slots.begin(np.array([7, 0]))  # past the capacity: grows, keeping what it held
    slots.append(torch.ones(2, 1, 3, 1), torch.ones(2, 1, 3, 1))
    assert slots.capacity >= 10 and slots.keys[0, 0, 1, 0] == 9 and slots.keys[0, 0, 7:10, 0].tolist() == [1] * 3
    assert slots.keys[1, 0, :4, 0].tolist() == [1, 1, 1, 5]


def test_bad_batches_are_refused_in_one_line(tiny, drafters):
    from simspec.engine.drafter import Drafter

    with pytest.raises(SimspecError, match="--batch-size must be >= 1"):
        SpeculativeEngine(tiny, drafters["eagle3"], batch_size=0)
    with pytest.raises(SimspecError, match="no prompts"):
        SpeculativeEngine(tiny, drafters["eagle3"], batch_size=2).decode([], None, 8)

    class Odd(Drafter):
        name = "odd"
        reset = commit = draft_root = draft_level = end_cycle = None

    with pytest.raises(SimspecError, match="cannot decode batches"):
        SpeculativeEngine(tiny, Odd(), batch_size=2).decode([[1, 2]], StaticPolicy(2, 1, 2), 4)


def test_a_drafter_kind_without_rows_decodes_one_sequence_through_its_own_methods(tiny, drafters, prompts):
    """A drafter kind that declared no rows class (a plugin's, say) still decodes at batch 1,
    through its single-sequence ``Drafter`` methods (``OneRow``): the same trees, the same
    acceptance, as the built-in kind's rows."""
    from simspec.engine.drafter import Drafter

    inner = drafters["eagle3"]

    class Undeclared(Drafter):  # delegates every method: its own kind, with no rows declared
        name, uses_target_hidden, feature_layers = "undeclared", inner.uses_target_hidden, inner.feature_layers
        draft_vocab = inner.draft_vocab  # its reduced vocabulary's map to the target's ids

        def reset(self, prompt, prompt_hidden):
            inner.reset(prompt, prompt_hidden)

        def commit(self, tokens, hidden):
            inner.commit(tokens, hidden)

        def draft_root(self):
            return inner.draft_root()

        def draft_level(self, tokens, depth, visible):
            return inner.draft_level(tokens, depth, visible)

        def end_cycle(self):
            inner.end_cycle()

    own, declared = SpeculativeEngine(tiny, Undeclared()), SpeculativeEngine(tiny, inner)
    for p in prompts[:3]:
        alone, rows = own.generate(p, StaticPolicy(4, 2, 6), 16), declared.generate(p, StaticPolicy(4, 2, 6), 16)
        assert alone.tokens == rows.tokens == declared.greedy(p, 16).tokens
        assert _accepted([alone]) == _accepted([rows])


@pytest.mark.long(seconds=20)
@pytest.mark.model
def test_the_demo_target_at_batch_4_with_its_shipped_eagle_head(target, prompt_ids):
    """Four held-out chat and code prompts, 24 tokens each, in one batch of 4 (uneven lengths)."""
    from simspec.engine.load import load_drafter

    drafter = load_drafter("eagle", target)
    prompts = [ids for _, ids in prompt_ids]
    single = SpeculativeEngine(target, drafter)
    policy = StaticPolicy(5, 4, 12)
    alone = [single.generate(p, policy, 24) for p in prompts]
    run = SpeculativeEngine(target, drafter, batch_size=4).decode(prompts, policy, 24)
    assert [g.tokens for g in run.generations] == [single.greedy(p, 24).tokens for p in prompts]
    assert _accepted(run.generations) == _accepted(alone)
    assert np.mean([g.tau for g in alone]) > 1.8  # the head drafts paths the target accepts
