"""Sampling at T > 0 in the batched engine: four rows at once, each sequence with its own
generator, keep the target's joint law of the first two tokens (the G-test of test_sampling.py,
on the same tiny Llama and drafters), plain and speculative, trees and a chain; the same test
rejects a deliberately broken verifier at the same number of draws (its power at B = 4)."""

from __future__ import annotations

import pytest
from helpers import FAIL, PASS, g_test
from helpers import TINY_PROMPT as PROMPT
from test_sampling import CASES, BonusFromP, exact_first_two

from simspec.engine.sampling import Sampling
from simspec.engine.speculative import SpeculativeEngine
from simspec.policies.base import StaticPolicy

ROWS = 4
# Sequences per G-test, as the batch-1 tree tests draw. Its power at B = 4 (2026-12-05): the
# broken verifier below gave p = 1.8e-16 to 1.1e-8 over six blocks of 600 seeds (FAIL is 1e-6),
# the correct one 0.045 to 0.79 on the same blocks (PASS is 1e-3).
DRAWS = 600


def first_two_p_value(engine: SpeculativeEngine, policy, n: int) -> float:
    prompts, seeds = [PROMPT] * n, range(n)
    run = engine.decode(prompts, policy, 2, seeds)
    counts: dict = {}
    for generation in run.generations:
        key = tuple(generation.tokens[:2])
        counts[key] = counts.get(key, 0) + 1
    return g_test(counts, exact_first_two(engine.target, engine.sampling), n)


@pytest.mark.parametrize("case", list(CASES))
def test_batched_sampling_keeps_the_targets_law_of_the_first_two_tokens(case, tiny, drafters):
    draft, shape, sampling = CASES[case]
    engine = SpeculativeEngine(tiny, drafters[draft], batch_size=ROWS, sampling=sampling)
    assert first_two_p_value(engine, StaticPolicy(*shape), DRAWS) > PASS, case


def test_batched_plain_sampling_keeps_the_targets_law(tiny, drafters):
    engine = SpeculativeEngine(tiny, drafters["lm"], batch_size=ROWS, sampling=Sampling(1.0))
    assert first_two_p_value(engine, None, DRAWS) > PASS


def test_the_batched_test_rejects_a_broken_verifier(tiny, drafters):
    draft, shape, sampling = CASES["lm tree T=0.7 top-p 0.9"]
    engine = SpeculativeEngine(tiny, drafters[draft], batch_size=ROWS, sampling=sampling, tree_verifier=BonusFromP())
    assert first_two_p_value(engine, StaticPolicy(*shape), DRAWS) < FAIL


def test_a_sequences_seed_fixes_its_output_in_the_batch(tiny, drafters):
    engine = SpeculativeEngine(tiny, drafters["eagle3"], batch_size=ROWS, sampling=Sampling(1.0))
    policy = StaticPolicy(3, 3, 7)
    first = engine.decode([PROMPT] * 6, policy, 12, seeds=[5, 6, 7, 8, 9, 10])
    again = engine.decode([PROMPT] * 6, policy, 12, seeds=[5, 6, 7, 8, 9, 10])
    assert [g.tokens for g in first.generations] == [g.tokens for g in again.generations]
    assert len({tuple(g.tokens) for g in first.generations}) > 1  # the seeds differ, so do the samples
