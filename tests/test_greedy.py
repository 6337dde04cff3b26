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


def test_a_prompts_sample_depends_on_the_seed_and_the_prompt_not_on_its_batch(tiny, prompts):
    greedy = greedy_continuations(tiny, prompts, NEW, BATCH)
    sampled = greedy_continuations(tiny, prompts, NEW, BATCH, temperature=1.0, seed=3)
    assert sampled == greedy_continuations(tiny, prompts, NEW, BATCH, temperature=1.0, seed=3)
    assert sampled != greedy and sampled != greedy_continuations(tiny, prompts, NEW, BATCH, temperature=1.0, seed=4)
    # other batch-mates, another batch size, another order: every prompt draws the same sample
    odd = greedy_continuations(tiny, prompts[1::2], NEW, 3, temperature=1.0, seed=3)
    assert odd == sampled[1::2]
    assert greedy_continuations(tiny, prompts[::-1], NEW, 1, temperature=1.0, seed=3) == sampled[::-1]


def test_a_batch_stops_once_every_row_has_emitted_a_stop_token(tiny, prompts):
    whole = greedy_continuations(tiny, prompts, NEW, BATCH)
    second = frozenset(seq[len(p) + 1] for seq, p in zip(whole, prompts))  # every row emits one by token 2
    stopped = greedy_continuations(tiny, prompts, NEW, BATCH, stop=second)
    for full, cut, prompt in zip(whole, stopped, prompts):
        assert full[:len(cut)] == cut and 1 <= len(cut) - len(prompt) <= 2  # the same text, cut short
    # a row that stopped first rides along until its batch-mate stops: one batch ends at token 2
    assert any(len(cut) - len(p) == 2 for cut, p in zip(stopped, prompts))
    assert greedy_continuations(tiny, prompts, NEW, BATCH, stop=frozenset({TINY_VOCAB + 5})) == whole
