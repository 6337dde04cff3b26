"""The Bayes rule over the drafted tree and the information bound built on it: the expected-tokens
identity, the size decision against the curves, the bound's machinery (it nears the oracle when
it knows the path), lossless decoding on both engines, and the baseline through the CLI."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import ROOT, cost_model

from simspec.policies.rules.bayes import BayesTree, expected_tokens, node_probabilities
from simspec.sim.traces import accepted_at


class _Fixed:
    """A node classifier whose answer is the joint probability itself."""

    def predict(self, features):
        return np.exp(features[:, 0])


class _Curves:
    """Costs with a verification slope of ``slope`` seconds per token."""

    def __init__(self, slope: float) -> None:
        self.slope = slope

    def draft(self, nodes, context):
        return 0.002 + 0 * np.asarray(nodes, float)

    def verify(self, size, context):
        return 0.05 + self.slope * (np.asarray(size, float) - 1) + 0 * np.asarray(context, float)

    def cycle(self, depth, width, size, context, committed):
        return self.verify(size, context) + np.maximum(np.asarray(depth) - 1, 0) * 0.002


@pytest.fixture(scope="module")
def shipped():
    from simspec.sim.evaluate import split_traces
    from simspec.sim.profile import load_profile

    profile = load_profile(ROOT / "calibration" / "cpu-demo")
    return split_traces(profile.traces(), "heldout"), profile.cost


@pytest.fixture(scope="module")
def small(shipped):
    """Every 16th held-out prompt and a node classifier fitted on them quickly."""
    from simspec.policies.stopping import AcceptancePredictor
    from simspec.sim.labels import WHOLE_TREE, node_examples

    traces, cost = shipped
    traces = traces.subset(np.arange(0, traces.n_prompts, 16))
    return traces, cost, AcceptancePredictor.fit(*node_examples(traces, positions=120, top=WHOLE_TREE), steps=60)


def test_with_the_path_known_expected_tokens_are_the_accepted_drafts_plus_one(shipped):
    """On recorded trees: 1 on the greedy path's nodes, 0 elsewhere, and the expected tokens of
    verifying V nodes are what replay accepts there, for every V; in trees cut at D levels too,
    but for float16 near-ties (the traces' scores are rounded; the engine ordered unrounded ones)."""
    from simspec.sim.bound import perfect_probabilities

    traces, _ = shipped
    at = np.random.default_rng(0).choice(traces.positions, 300, replace=False)
    scores, p = traces.level_scores[at].astype(np.float32), perfect_probabilities(traces)(at)
    level_of = np.repeat(np.arange(traces.depth_max - 1), traces.width ** 2)
    for depth in (2, 4, traces.depth_max):
        gain = expected_tokens(p, scores, level_of[None, :] < depth - 1)
        for size in (1, 2, 5, 17, 60):
            accepted = accepted_at(traces.path_rank, at, np.full(len(at), depth), np.full(len(at), size))
            same = gain[:, min(size, gain.shape[1]) - 1] == accepted + 1.0
            assert same.all() if depth == traces.depth_max else same.mean() > 0.98, (depth, size)
    assert p.sum(axis=1).max() >= 3  # paths several levels deep are among them


def test_the_bounds_ranking_sorted_once_gives_every_depths_expected_tokens_exactly():
    """The bound ranks a cycle's nodes once and brings each depth's to the front (no sort of the
    scores per depth): the same sums, to the bit, as ranking each depth's nodes on their own, over
    trees with ties, padding and rows of different sizes."""
    from simspec.sim.bound import _RankedNodes

    rng = np.random.default_rng(3)
    levels, width = 6, 4
    scores = np.round(rng.standard_normal((9, levels, width * width)), 1).astype(np.float32)  # ties
    scores[rng.random(scores.shape) < 0.3] = -np.inf  # padding
    scores[0, 2:] = -np.inf  # a row with two levels
    p = rng.random(scores.shape).reshape(len(scores), -1)
    level_of = np.repeat(np.arange(levels), width * width)
    ranked = _RankedNodes(p, scores, level_of)
    for kept in range(levels + 1):
        want = expected_tokens(p, scores, level_of[None, :] < kept)
        got = ranked.expected_tokens(kept)
        assert got.shape == want.shape and np.array_equal(got, want)


def test_the_size_maximises_expected_tokens_less_priced_seconds_and_reads_the_curves():
    scores = np.full((3, 2, 4), -np.inf, np.float32)
    scores[:, 0, :2] = [[-0.1, -2.0], [-3.0, -4.0], [-0.05, -0.2]]
    scores[:, 1] = [[-0.2, -2.2, -3, -5], [-3.5, -4, -5, -6], [-0.1, -0.3, -0.3, -0.4]]
    rows, planned = np.arange(3), np.full(3, 7)
    sizes = {}
    for slope in (0.0005, 0.02):
        policy = BayesTree(_Fixed(), _Curves(slope), 1.5, 2, 4)
        policy.reset_batch(3)
        policy.plan_batch(rows, np.full(3, 100.0))
        sizes[slope] = policy.choose_size_batch(rows, np.full(3, 3), scores, planned)
        for r in rows:  # brute force over every size
            nodes = np.sort(np.exp(scores[r][np.isfinite(scores[r])]))[::-1]
            value = [1 + nodes[: v - 1].sum() - policy.rate[r] * _Curves(slope).verify(v, 100) for v in range(1, 8)]
            assert sizes[slope][r] == int(np.argmax(value)) + 1
    assert (sizes[0.02] <= sizes[0.0005]).all() and (sizes[0.02] < sizes[0.0005]).any()


def test_in_a_batch_one_size_maximises_the_rows_expected_tokens_together_less_the_batchs_priced_seconds():
    scores = np.full((3, 2, 4), -np.inf, np.float32)
    scores[:, 0, :2] = [[-0.1, -2.0], [-3.0, -4.0], [-0.05, -0.2]]
    scores[:, 1] = [[-0.2, -2.2, -3, -5], [-3.5, -4, -5, -6], [-0.1, -0.3, -0.3, -0.4]]
    rows, sizes = np.arange(3), {}
    for batch in (1, 3):
        policy = BayesTree(_Fixed(), _Curves(0.008), 1.5, 2, 4)
        policy.batch_size = batch
        policy.reset_batch(3)
        policy.plan_batch(rows, np.full(3, 100.0))
        sizes[batch] = policy.choose_size_batch(rows, np.full(3, 3), scores, np.full(3, 7))
    assert len(set(sizes[1].tolist())) > 1 and len(set(sizes[3].tolist())) == 1  # apart alone, one in a batch
    # brute force: one forward verifies every row at that size, paid at the batch's rate (3 rows' worth)
    nodes = [np.sort(np.exp(scores[r][np.isfinite(scores[r])]))[::-1] for r in rows]
    value = [sum(1 + n[: v - 1].sum() for n in nodes) - policy.rate.sum() * _Curves(0.008).verify(v, 100)
             for v in range(1, 8)]
    assert sizes[3][0] == int(np.argmax(value)) + 1 < sizes[1].max()  # not the largest tree any row would pay for


def test_in_a_batch_the_rows_draft_on_together_when_their_gains_together_pay_for_the_level():
    strong, weak = [-0.05, -0.4, -3.0, -4.0], [-6.0, -6.5, -7.0, -7.5]
    answers = {}
    for batch, frontiers in ((1, [strong, weak, weak]), (3, [strong, weak, weak]), (3, [weak, weak, weak])):
        policy = BayesTree(_Fixed(), _Curves(0.0005), None, 2, 6)
        policy.batch_size = batch
        policy.reset_batch(3)
        policy.plan_batch(np.arange(3), np.full(3, 100.0))
        go = policy.keep_drafting_batch(np.arange(3), np.full(3, 2), np.array(frontiers, np.float32), np.full(3, 6))
        answers[batch, frontiers[0] == strong] = go.tolist()
    assert answers[1, True] == [True, False, False]  # apart, each sequence decides for itself
    assert answers[3, True] == [True] * 3  # the weak rows ride along: the level is drafted anyway
    assert answers[3, False] == [False] * 3  # and nobody pays for a level nobody gains from


def test_the_auto_rate_is_the_sequences_tokens_per_priced_second_times_the_batch():
    rows, rates = np.arange(2), {}
    for batch in (1, 2):
        policy = BayesTree(_Fixed(), _Curves(0.001), None, 2, 4)
        policy.batch_size = batch
        policy.reset_batch(2)
        policy.plan_batch(rows, np.full(2, 100.0))
        first = policy.rate.copy()
        policy.observe_batch(rows, np.array([3, 1]), np.array([4, 1]), np.array([2, 0]))
        policy.plan_batch(rows, np.full(2, 100.0))
        rates[batch] = policy.rate.copy()
        assert rates[batch][0] > first[0] > rates[batch][1]  # 3 tokens in a cycle beats the prior; 1 falls short
    assert np.allclose(rates[2], 2 * rates[1])


def test_the_bound_nears_the_oracle_when_it_knows_the_path_and_node_scores_keep_it_below(shipped):
    from simspec.policies.stopping import AcceptancePredictor
    from simspec.sim.bound import full_tree_bayes, information_bound, perfect_probabilities
    from simspec.sim.labels import WHOLE_TREE, node_examples
    from simspec.sim.oracle import oracle

    traces, cost = shipped
    traces = traces.subset(np.arange(0, traces.n_prompts, 12))
    top = np.median(oracle(traces, cost).speedup)
    known, _ = full_tree_bayes(traces, cost, perfect_probabilities(traces), 2.0)
    assert np.median(known) > 0.9 * top
    predictor = AcceptancePredictor.fit(*node_examples(traces, positions=200, top=WHOLE_TREE), steps=100)
    scored = information_bound(traces, cost, predictor, kappas=(1.75, 2.0))
    assert np.median(scored.speedup) < np.median(known) - 0.1
    assert scored.depths.sum() > 0 and scored.kappa in (1.75, 2.0)


@pytest.mark.model
@pytest.mark.parametrize("batch, kappa", [(1, 1.0), (3, 0.3)])  # in a batch the rate is the rows' sum
def test_bayes_decodes_losslessly_alone_and_in_batches(batch, kappa, tiny, drafters):
    from helpers import decode_alone_or_batched, tiny_prompts

    policy = BayesTree(_Fixed(), cost_model(), kappa, 3, 6)
    outputs, reference, cycles = decode_alone_or_batched(tiny, drafters["eagle3"], policy, tiny_prompts(5), batch)
    assert outputs == reference
    assert len({c.size for c in cycles}) > 1 and len({c.depth for c in cycles}) > 1


def test_bayes_tunes_and_replays_in_the_simulator(tmp_path):
    from helpers import simulated_rows

    rows = simulated_rows(tmp_path, "bayes")
    assert rows[1]["method"].startswith("bayes(") and rows[1]["speedup"] > 0


class _NodeOnly:
    """A history classifier that reads only the node features: the history bound must then make
    the node-score bound's decisions exactly."""

    def __init__(self, predictor) -> None:
        self.predictor = predictor

    def predict(self, features):
        from simspec.policies.rules.c2t import N_NODE_FEATURES

        return self.predictor.predict(features[:, :N_NODE_FEATURES])


def test_the_node_score_bound_computes_each_positions_probabilities_once_and_the_same(small):
    """Across its kappas' runs the bound reads each trace position's probabilities from a table: the
    same speedups and depths as every visit computing its own, and the classifier asked once per
    position."""
    from simspec.sim.bound import _best_kappa, information_bound

    traces, cost, predictor = small
    asked = []

    class Counting:
        def predict(self, features):
            asked.append(len(features))
            return predictor.predict(features)

    kappas = (1.5, 2.0, 3.0)
    kept = information_bound(traces, cost, Counting(), kappas=kappas)
    nodes = traces.level_scores[0].size
    assert sum(asked) // nodes <= len(traces.level_scores)  # each position at most once
    each = _best_kappa(traces, cost, lambda at, h: node_probabilities(
        predictor, traces.level_scores[at].astype(np.float32), traces.depth_max), kappas)
    assert kept.kappa == each.kappa and np.array_equal(kept.speedup, each.speedup)
    assert np.array_equal(kept.depths, each.depths)


def test_the_history_bound_decides_each_cycle_with_its_own_prompts_recent_acceptance(small):
    from simspec.sim.bound import (
        HISTORY_DECAY,
        HISTORY_FEATURES,
        HISTORY_PRIOR,
        full_tree_bayes,
        history_bound,
        history_predictor,
        information_bound,
    )

    traces, cost, predictor = small
    plain = information_bound(traces, cost, predictor, kappas=(2.0,))
    same = history_bound(traces, cost, _NodeOnly(predictor), kappas=(2.0,))
    assert np.array_equal(same.speedup, plain.speedup) and np.array_equal(same.depths, plain.depths)

    visits: list = []
    full_tree_bayes(traces, cost, lambda at, h: node_probabilities(predictor, traces.level_scores[at].astype(
        np.float32), traces.depth_max), 2.0, visits)
    first_at, first = visits[0]
    second_at, second = visits[1]
    assert np.allclose(first[:, :2], HISTORY_PRIOR)
    assert np.allclose(first[:, 2], np.log(traces.context_length[first_at]))
    # the prompts still decoding after the first cycle: each advanced by its accepted tokens + 1
    prompt_of = np.searchsorted(traces.prompt_offsets, second_at, side="right") - 1
    accepted = second_at - first_at[np.isin(np.searchsorted(traces.prompt_offsets, first_at, side="right") - 1,
                                             prompt_of)] - 1
    assert np.allclose(second[:, 0], HISTORY_DECAY * HISTORY_PRIOR[0] + (1 - HISTORY_DECAY) * accepted)
    assert accepted.std() > 0  # the prompts' histories differ

    fitted = history_predictor(traces, cost, predictor, 2.0, positions=40)
    assert fitted.w1.shape[0] == 4 + HISTORY_FEATURES
