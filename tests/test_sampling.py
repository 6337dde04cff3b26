"""Speculative sampling at temperature > 0 keeps the target's output distribution, tested
statistically, and each test shown to have power: a deliberately broken verifier fails it.

Two levels. The verifiers alone, on synthetic target / draft tables with exact joint
distributions (many samples, milliseconds). Then the engine end to end on a tiny real Llama
(random weights, sharpened head) with both kinds of drafter: a random-weight EAGLE-3 head in
the public layout (reduced vocabulary through d2t, tree rule) and a draft LM (the target's
first layers: tree rule, and the q-aware rule in chain mode). There the first two tokens'
joint distribution is compared with the target's exact one (a G-test), and every generated
token is checked by the randomised probability integral transform (KS against Uniform(0, 1)).
Seeds are fixed so the suite is reproducible; the assertions are on p-values, never on a
particular output."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import FAIL, PASS, TINY_VOCAB, g_test
from helpers import TINY_PROMPT as PROMPT
from scipy import stats

from simspec.engine.sampling import ChainVerifier, Sampling, TreeVerifier, distribution, draw, pit_values

# -- broken verifiers: each drops one step of the algorithm ----------------------------------

class BonusFromP(TreeVerifier):
    """After rejecting children, draws the bonus token from p instead of the residual."""

    @staticmethod
    def after_rejection(p, x):
        return p


class NoRenormalise(TreeVerifier):
    """Zeroes a rejected sibling but tries the next one against the un-renormalised p."""

    @staticmethod
    def after_rejection(p, x):
        p[x] = 0.0
        return p


class ResidualFromP(ChainVerifier):
    """On a rejection draws from p instead of norm(max(0, p - q))."""

    @staticmethod
    def residual(p, q):
        return p


# -- the verifiers alone, on exact tables ---------------------------------------------------

VOCAB = 6


def tables(seed: int):
    rng = np.random.default_rng(seed)
    p0 = rng.dirichlet(np.full(VOCAB, 0.6))
    p1 = rng.dirichlet(np.full(VOCAB, 0.6), size=VOCAB)  # p(x2 | x1)
    q0 = rng.dirichlet(np.full(VOCAB, 0.6))
    q1 = rng.dirichlet(np.full(VOCAB, 0.6), size=VOCAB)
    return p0, p1, q0, q1


def first_two_tree(verifier: TreeVerifier, p0, p1, rng) -> tuple[int, int]:
    """One cycle over a fixed two-level tree (root -> 3 children -> 2 grandchildren each),
    then plain sampling for whatever the cycle did not emit."""
    top = np.argsort(-p0)[:3]  # the drafter's ranks: the likeliest first, as a head would draft
    tokens, parents = [0], []
    for x in top:
        tokens.append(int(x))
        parents.append(0)
    for i, x in enumerate(top):
        for y in np.argsort(-p1[x])[[0, 2]]:
            tokens.append(int(y))
            parents.append(i + 1)
    tokens, parents = np.array(tokens), np.array(parents)
    depth1 = {r: tokens[r] for r in range(1, 4)}

    def probs_of(row):
        if row == 0:
            return p0
        if row in depth1:
            return p1[depth1[row]]
        return np.full(VOCAB, 1 / VOCAB)

    rows, bonus = verifier.accept(tokens, parents, probs_of, rng)
    emitted = [int(tokens[r]) for r in rows[1:]] + [bonus]
    if len(emitted) == 1:
        emitted.append(draw(p1[emitted[0]], rng))
    return emitted[0], emitted[1]


def first_two_chain(verifier: ChainVerifier, p0, p1, q0, q1, rng) -> tuple[int, int]:
    x1 = draw(q0, rng)
    x2 = draw(q1[x1], rng)
    probs = [p0, p1[x1], np.full(VOCAB, 1 / VOCAB)]
    rows, bonus = verifier.accept(np.array([0, x1, x2]), [q0, q1[x1]], lambda r: probs[r], rng)
    emitted = [[0, x1, x2][r] for r in rows[1:]] + [bonus]
    if len(emitted) == 1:
        emitted.append(draw(p1[emitted[0]], rng))
    return emitted[0], emitted[1]


def joint_p_value(sample, p0, p1, n: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    counts: dict = {}
    for _ in range(n):
        key = sample(rng)
        counts[key] = counts.get(key, 0) + 1
    expected = {(a, b): p0[a] * p1[a, b] for a in range(VOCAB) for b in range(VOCAB)}
    return g_test(counts, expected, n)


@pytest.mark.parametrize("seed", [0, 1])
def test_tree_walk_emits_the_target_distribution_and_broken_walks_do_not(seed):
    p0, p1, _, _ = tables(seed)
    n = 3000
    good = joint_p_value(lambda rng: first_two_tree(TreeVerifier(), p0, p1, rng), p0, p1, n, seed)
    assert good > PASS, good
    for broken in (BonusFromP(), NoRenormalise()):
        bad = joint_p_value(lambda rng: first_two_tree(broken, p0, p1, rng), p0, p1, n, seed)
        assert bad < FAIL, (type(broken).__name__, bad)


@pytest.mark.parametrize("seed", [0, 1])
def test_chain_rule_emits_the_target_distribution_and_a_wrong_residual_does_not(seed):
    p0, p1, q0, q1 = tables(seed)
    n = 3000
    good = joint_p_value(lambda rng: first_two_chain(ChainVerifier(), p0, p1, q0, q1, rng), p0, p1, n, seed)
    assert good > PASS, good
    bad = joint_p_value(lambda rng: first_two_chain(ResidualFromP(), p0, p1, q0, q1, rng), p0, p1, n, seed)
    assert bad < FAIL, bad


def test_top_p_keeps_the_smallest_nucleus_and_temperature_sharpens():
    logits = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
    assert distribution(logits, Sampling(1.0, top_p=0.8)) == pytest.approx([0.625, 0.375, 0, 0])
    assert distribution(logits, Sampling(1.0, top_p=0.81)) == pytest.approx(np.array([0.5, 0.3, 0.15, 0]) / 0.95)
    assert distribution(logits, Sampling(1.0)) == pytest.approx([0.5, 0.3, 0.15, 0.05])
    cold = distribution(logits, Sampling(0.5))
    assert cold == pytest.approx(np.array([0.25, 0.09, 0.0225, 0.0025]) / 0.3650)


def test_pit_is_uniform_for_draws_from_p_and_not_for_draws_from_another_distribution():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.full(50, 0.3), size=4000)
    right = np.array([draw(row, rng) for row in p])
    wrong = np.array([int(np.argmax(row)) if rng.random() < 0.2 else draw(row, rng) for row in p])
    assert stats.kstest(pit_values(p, right, rng), "uniform").pvalue > PASS
    assert stats.kstest(pit_values(p, wrong, rng), "uniform").pvalue < FAIL


def test_bad_sampling_settings_are_refused():
    from simspec.errors import SimspecError

    for bad in (dict(temperature=-1), dict(temperature=1, top_p=0), dict(temperature=1, top_p=1.5),
                dict(temperature=0, top_p=0.9), dict(temperature=float("nan"))):
        with pytest.raises(SimspecError):
            Sampling(**bad)


# -- the engine end to end on a tiny real Llama -----------------------------------------------

# ``tiny`` and ``drafters`` (conftest.py): a 6-layer random Llama over TINY_VOCAB tokens with a
# sharpened head, a random EAGLE-3 head in the public layout, and a 2-layer draft LM.


def exact_first_two(tiny, sampling: Sampling) -> dict:
    """The target's own joint distribution of its first two tokens after PROMPT."""
    with torch.inference_mode():
        p0 = distribution(tiny.model(torch.tensor([PROMPT])).logits[0, -1], sampling)
        batch = torch.tensor([PROMPT + [x] for x in range(TINY_VOCAB)])
        p1 = distribution(tiny.model(batch).logits[:, -1], sampling)
    return {(a, b): p0[a] * p1[a, b] for a in range(TINY_VOCAB) for b in range(TINY_VOCAB)}


def first_two_p_value(engine, policy, n: int) -> float:
    """The G-test of the first two tokens of ``n`` sequences, seeds 0..n-1, drawn as rows of the
    engine's batched calls (``ROWS`` sequences per forward)."""
    run = engine.decode([PROMPT] * n, policy, 2, range(n))
    counts: dict = {}
    for generation in run.generations:
        key = tuple(generation.tokens[:2])
        counts[key] = counts.get(key, 0) + 1
    return g_test(counts, exact_first_two(engine.target, engine.sampling), n)


def pit_p_value(engine, policy, n_sequences: int, tokens: int) -> float:
    """KS p-value of every generated token's PIT under the target's distribution at it (one
    target forward over each finished sequence gives every distribution). Seeds 0..n-1, one
    sequence at a time, or as rows of the engine's batched calls where it has rows (the same
    tokens: a seed's draws do not depend on the batch)."""
    rng = np.random.default_rng(12345)
    seeds = range(n_sequences)
    if engine.batch > 1:
        outs = [g.tokens for g in engine.decode([PROMPT] * n_sequences, policy, tokens, seeds).generations]
    else:
        outs = [(engine.sample(PROMPT, tokens, s) if policy is None else engine.generate(PROMPT, policy, tokens, s)
                 ).tokens for s in seeds]
    u = []
    for out in outs:
        with torch.inference_mode():
            logits = engine.target.model(torch.tensor([PROMPT + out])).logits[0, len(PROMPT) - 1:-1]
        u.append(pit_values(distribution(logits, engine.sampling), np.array(out), rng))
    return float(stats.kstest(np.concatenate(u), "uniform").pvalue)


CASES = {  # drafter, (D, W, V), sampling; the chain case runs the q-aware rule
    "eagle3 tree T=1": ("eagle3", (3, 3, 7), Sampling(1.0)),
    "lm tree T=0.7 top-p 0.9": ("lm", (3, 2, 5), Sampling(0.7, top_p=0.9)),
    "lm chain T=1": ("lm", (4, 1, 4), Sampling(1.0)),
}
# The G-tests draw their sequences as rows of batched calls, ROWS at a time, each row with its own
# generator (seeds 0..n-1), so a sequence's draw is the same at any batch size; one sequence is a
# batch of one, whose one-row forwards the PIT tests below run. Sequences per G-test, per verifier
# rule; the broken-verifier tests run the same number, so that they show the power of the test
# they break. Power at ROWS = 8 (2026-12-05, six blocks of seeds k*n..(k+1)*n-1, the test's block
# first; FAIL is 1e-6, PASS 1e-3): the tree rule with its bonus drawn from p, 600 sequences, p =
# 2.0e-11, 1.1e-8, 2.6e-10, 2.8e-9, 1.8e-16, 1.0e-11; a wrong chain residual bends the law less,
# 800 sequences, p = 7.1e-12, 1.7e-4, 6.0e-6, 5.8e-12, 3.3e-10, 1.2e-7 (two blocks of six above
# FAIL: the test's own block is far below it). The correct rules on the same blocks: trees 0.045
# to 0.92, the chain 0.21 to 0.76, plain sampling 0.14 to 0.83.
ROWS = 8
DRAWS = {"tree": 600, "chain": 800}


def draws(case: str) -> int:
    return DRAWS["chain" if CASES[case][1][1] == 1 else "tree"]


def rows_engine(tiny, drafter, sampling: Sampling, **verifiers):
    from simspec.engine.speculative import SpeculativeEngine

    return SpeculativeEngine(tiny, drafter, sampling, batch_size=ROWS, **verifiers)


@pytest.mark.parametrize("case", list(CASES))
def test_speculative_sampling_matches_the_targets_first_two_tokens(case, tiny, drafters):
    from simspec.policies.base import StaticPolicy

    draft, shape, sampling = CASES[case]
    p = first_two_p_value(rows_engine(tiny, drafters[draft], sampling), StaticPolicy(*shape), draws(case))
    assert p > PASS, (case, p)


def test_plain_sampling_matches_the_targets_first_two_tokens(tiny, drafters):
    assert first_two_p_value(rows_engine(tiny, drafters["lm"], Sampling(1.0)), None, DRAWS["chain"]) > PASS


# Power needs drafts the target finds likely (rejecting an unlikely draft removes little mass,
# so a wrong residual hardly shows): the draft LM's. The random EAGLE-3 head above is there to
# exercise d2t and the tree walk over a reduced vocabulary, not to show power.
# (A missing renormalisation between siblings only bends the second sibling's odds: the exact
# tables above show it; 600 engine runs would not.)
@pytest.mark.parametrize("case, broken, pit", [("lm tree T=0.7 top-p 0.9", BonusFromP(), False),
                                               pytest.param("lm chain T=1", ResidualFromP(), True,
                                                            marks=pytest.mark.long)],
                         ids=["tree-bonus-from-p", "chain-residual-from-p"])
def test_the_same_tests_reject_a_broken_verifier(case, broken, pit, tiny, drafters):
    from simspec.policies.base import StaticPolicy

    draft, shape, sampling = CASES[case]
    kind = "chain_verifier" if isinstance(broken, ChainVerifier) else "tree_verifier"
    engine = rows_engine(tiny, drafters[draft], sampling, **{kind: broken})
    assert first_two_p_value(engine, StaticPolicy(*shape), draws(case)) < FAIL
    if pit:  # the PIT's power, on the same broken rule (over every token of 60 sequences, drawn as rows)
        assert pit_p_value(engine, StaticPolicy(*shape), 60, 24) < FAIL


@pytest.mark.parametrize("case", ["eagle3 tree T=1", "lm chain T=1", "plain T=1"])
def test_every_generated_token_passes_the_probability_integral_transform(case, tiny, drafters):
    """One sequence at a time: the one-row forwards (no mask) the batched G-tests above do not run."""
    from simspec.engine.speculative import SpeculativeEngine
    from simspec.policies.base import StaticPolicy

    draft, shape, sampling = CASES[case] if case in CASES else ("lm", None, Sampling(1.0))
    engine = SpeculativeEngine(tiny, drafters[draft], sampling)
    assert pit_p_value(engine, shape and StaticPolicy(*shape), 30, 24) > PASS


def test_a_sequences_seed_fixes_its_output_in_the_batch(tiny, drafters):
    """Its seed alone: not its row, its batch-mates, when it was admitted, nor the batch size (a
    generator shared by the rows, or drawn by row, would give each seed another output here)."""
    from simspec.engine.speculative import SpeculativeEngine
    from simspec.policies.base import StaticPolicy

    engine = rows_engine(tiny, drafters["eagle3"], Sampling(1.0))
    policy = StaticPolicy(3, 3, 7)
    seeds = list(range(5, 15))  # ten sequences through eight rows: the last two wait for a free row
    first = engine.decode([PROMPT] * 10, policy, 12, seeds=seeds)
    reversed_ = engine.decode([PROMPT] * 10, policy, 12, seeds=seeds[::-1])  # each seed in another row, first or last
    assert [g.tokens for g in first.generations] == [g.tokens for g in reversed_.generations][::-1]
    alone = SpeculativeEngine(tiny, drafters["eagle3"], Sampling(1.0)).generate(PROMPT, policy, 12, seed=seeds[-1])
    assert alone.tokens == first.generations[-1].tokens  # admitted last in eight rows; alone in one
    assert len({tuple(g.tokens) for g in first.generations}) > 1  # the seeds differ, so do the samples


def test_one_seed_gives_one_output_and_temperature_zero_is_greedy(tiny, drafters):
    from simspec.engine.speculative import SpeculativeEngine
    from simspec.policies.base import StaticPolicy

    policy = StaticPolicy(3, 3, 7)
    sampled = SpeculativeEngine(tiny, drafters["eagle3"], Sampling(1.0, seed=7))
    first = sampled.generate(PROMPT, policy, 24).tokens
    assert sampled.generate(PROMPT, policy, 24).tokens == first  # the engine's seed
    assert sampled.generate(PROMPT, policy, 24, seed=7).tokens == first
    others = {tuple(sampled.generate(PROMPT, policy, 24, seed=s).tokens) for s in range(8, 14)}
    assert len(others) > 1 and tuple(first) not in others or len(others) > 2
    greedy = SpeculativeEngine(tiny, drafters["eagle3"])
    assert greedy.generate(PROMPT, policy, 24).tokens == greedy.greedy(PROMPT, 24).tokens
    assert greedy.plain(PROMPT, 24).seed is None and sampled.plain(PROMPT, 24, seed=3).seed == 3


# -- the simulator's acceptance law at T > 0 against the engine's verifier ----------------------

def random_tree(rng, n: int, vocab: int = 40):
    """A tree in engine order (parents first) with the target's probability of each node given
    its parent, and per node the full distribution the verifier reads (children's tokens hold
    their probabilities, the rest of the mass is spread over the other tokens)."""
    parents = np.full(n, -1)
    for i in range(1, n):
        parents[i] = rng.integers(0, i) if i > 1 else 0
    depths = np.zeros(n, dtype=int)
    for i in range(1, n):
        depths[i] = depths[parents[i]] + 1
    probs, tokens, rows = np.ones(n), np.zeros(n, dtype=int), []
    for r in range(n):
        kids = np.flatnonzero(parents == r)
        share = rng.dirichlet(np.full(len(kids) + 1, 0.7))  # the last share: tokens never drafted
        dist = np.full(vocab, share[-1] / (vocab - len(kids)))
        for j, k in enumerate(kids):
            tokens[k], probs[k] = j, share[j]
            dist[j] = share[j]
        rows.append(dist)
    return parents, depths, probs, tokens, rows


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_simulated_acceptance_law_equals_the_engines_tree_walk(seed):
    from simspec.sim.stochastic import (
        accepted_distribution,
        at_least,
        expected_accepted,
        reach_probabilities,
        sample_accepted,
        verified_mask,
    )

    rng = np.random.default_rng(seed)
    parents, depths, probs, tokens, rows = random_tree(rng, 14)
    reach = reach_probabilities(parents, probs)
    depth_max, size = int(depths.max()) + 1, 9
    verified = verified_mask(depths, depth_max, size)
    exact = accepted_distribution(reach, depths, verified, depth_max)
    assert exact.sum() == pytest.approx(1.0) and (exact >= -1e-12).all()
    assert expected_accepted(reach, verified) == pytest.approx(float(np.arange(depth_max) @ exact))

    # the engine's verifier over the same verified rows
    keep = np.flatnonzero(verified)
    row_of = {int(node): r for r, node in enumerate(keep)}
    parent_rows = np.array([row_of[int(parents[node])] for node in keep[1:]])
    n, counts = 6000, np.zeros(depth_max)
    for _ in range(n):
        accepted, _ = TreeVerifier().accept(tokens[keep], parent_rows, lambda r: rows[keep[r]], rng)
        counts[len(accepted) - 1] += 1
    expected = {a: exact[a] for a in range(depth_max) if exact[a] > 0}
    assert g_test({a: counts[a] for a in range(depth_max)}, expected, n) > PASS
    drawn = sample_accepted(np.broadcast_to(at_least(reach, depths, verified, depth_max), (n, depth_max)),
                            rng.random(n))
    assert g_test({a: int((drawn == a).sum()) for a in range(depth_max)}, expected, n) > PASS
