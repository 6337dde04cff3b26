"""Batched greedy generation (teacher text, trace continuations) on a tiny real Llama: sampling
seeded per batch, batches that stop at a stop token."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import TINY_VOCAB

from simspec.engine.greedy import greedy_continuations

NEW, BATCH = 6, 2


@pytest.fixture(scope="module")
def prompts():
    rng = np.random.default_rng(0)
    return [rng.integers(0, TINY_VOCAB, size=n).tolist() for n in (3, 5, 4, 7, 2, 6, 5, 3)]


def test_sampled_generation_is_seeded_per_batch(tiny, prompts):
    greedy = greedy_continuations(tiny, prompts, NEW, BATCH)
    sampled = greedy_continuations(tiny, prompts, NEW, BATCH, temperature=1.0, seed=3)
    assert sampled == greedy_continuations(tiny, prompts, NEW, BATCH, temperature=1.0, seed=3)
    assert sampled != greedy and sampled != greedy_continuations(tiny, prompts, NEW, BATCH, temperature=1.0, seed=4)
    # a batch's draws depend on its seed and first prompt only: skipping finished batches changes nothing
    done = {i: sampled[i] for i in range(len(prompts)) if i % 2 == 0}
    assert greedy_continuations(tiny, prompts, NEW, BATCH, done=done, temperature=1.0, seed=3) == sampled


def test_a_batch_stops_once_every_row_has_emitted_a_stop_token(tiny, prompts):
    whole = greedy_continuations(tiny, prompts, NEW, BATCH)
    second = frozenset(seq[len(p) + 1] for seq, p in zip(whole, prompts))  # every row emits one by token 2
    stopped = greedy_continuations(tiny, prompts, NEW, BATCH, stop=second)
    for full, cut, prompt in zip(whole, stopped, prompts):
        assert full[:len(cut)] == cut and 1 <= len(cut) - len(prompt) <= 2  # the same text, cut short
    # a row that stopped first rides along until its batch-mate stops: one batch ends at token 2
    assert any(len(cut) - len(p) == 2 for cut, p in zip(stopped, prompts))
    assert greedy_continuations(tiny, prompts, NEW, BATCH, stop=frozenset({TINY_VOCAB + 5})) == whole
