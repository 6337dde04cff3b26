"""The simulator at temperature > 0 (numpy only): traces recorded with node probabilities give
every (D, V) cycle its exact accepted-length law; replay draws from it, seeded; the oracle
minimises the expected time; the files round-trip and refuse what is not a sampled tree."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from helpers import DEPTH_MAX, FAIL, PASS, cost_model, g_test, random_traces, sampled_traces

from simspec.engine.tree import DraftTree, select_nodes
from simspec.errors import SimspecError
from simspec.policies import StaticPolicy
from simspec.policies.base import keep_best_children
from simspec.sim.oracle import oracle
from simspec.sim.replay import replay
from simspec.sim.stochastic import at_least, reach_probabilities, stored_nodes, verified_mask
from simspec.sim.trace_files import load_traces, save_traces
from simspec.sim.traces import ARRAYS


@pytest.mark.parametrize("ties", [False, True])
def test_stored_nodes_hold_every_top_v_set_in_engine_order(ties):
    rng = np.random.default_rng(int(ties))
    for _ in range(30):
        width, depth_max, nodes = int(rng.integers(1, 4)), 6, int(rng.integers(2, 12))
        tree = DraftTree(0, depth_max, width)
        for level in range(depth_max - 1):
            if level:
                tree.feed_frontier()
            logprobs = np.sort(-rng.exponential(1.0, (1 if level == 0 else width, width)), axis=1)[:, ::-1]
            tree.grow(np.round(logprobs, 1) if ties else logprobs, rng.integers(0, 9, logprobs.shape))
        scores, depths = tree.scores[:tree.n], tree.depths[:tree.n]
        kept = stored_nodes(scores, depths, depth_max, nodes)
        assert kept[0] == 0 and len(set(kept)) == len(kept)
        position = {int(node): i for i, node in enumerate(kept)}
        assert all(position[int(tree.parents[node])] < i for i, node in enumerate(kept) if node)  # parents first
        for d_levels in range(2, depth_max + 1):
            inside = np.flatnonzero(depths < d_levels)
            for size in range(1, nodes + 1):
                engine = inside[select_nodes(scores[inside], size)]  # what a (D, V) cycle verifies
                ours = kept[verified_mask(depths[kept], d_levels, size)]
                assert sorted(engine) == sorted(ours), (d_levels, size)


def best_children_by_hand(tree: DraftTree, size: int, k: int) -> list[int]:
    """The top-``size`` nodes, then from the root down each kept node's ``k`` best selected children."""
    top = set(select_nodes(tree.scores[:tree.n], size).tolist())
    kept, todo = [0], [0]
    while todo:
        node = todo.pop()
        kids = sorted((c for c in top if c and tree.parents[c] == node), key=lambda c: (-tree.scores[c], c))[:k]
        kept += kids
        todo += kids
    return sorted(kept)


def test_pruned_trees_are_what_the_engine_verifies_with_each_nodes_top_k():
    """Re-SpS's top-k within the recorded trees: each (D, V) set of the stored nodes, pruned to each
    node's k best children, is the set the engine's tree verifies at (V, k), for every D, V and k."""
    rng = np.random.default_rng(4)
    for trial in range(12):
        width, depth_max, nodes = int(rng.integers(2, 5)), 5, int(rng.integers(4, 16))
        draws = [np.sort(-rng.exponential(1.0, (1 if level == 0 else width, width)), axis=1)[:, ::-1]
                 for level in range(depth_max - 1)]
        draws = [np.round(d, 1) for d in draws] if trial % 3 == 0 else draws  # ties among siblings and levels
        tokens = [rng.integers(0, 9, d.shape) for d in draws]
        for d_levels in range(2, depth_max + 1):
            tree = DraftTree(0, d_levels, width)
            for level in range(d_levels - 1):
                if level:
                    tree.feed_frontier()
                tree.grow(draws[level], tokens[level])
            kept = stored_nodes(tree.scores[:tree.n], tree.depths[:tree.n], depth_max, nodes)
            column = np.full(tree.n, -1)
            column[kept] = np.arange(len(kept))
            parents = np.where(kept == 0, -1, column[tree.parents[kept]])
            for size in range(1, nodes + 1):
                for k in range(1, width + 1):
                    engine = tree.verification(size, k).nodes
                    assert sorted(engine) == best_children_by_hand(tree, size, k)
                    chosen = keep_best_children(parents, verified_mask(tree.depths[kept], d_levels, size), k,
                                                depth_max)[0]
                    assert sorted(kept[chosen]) == sorted(engine), (trial, d_levels, size, k)
                    if k == width:
                        assert sorted(engine) == sorted(tree.verification(size).nodes)


def test_pruned_replay_is_the_top_v_law_at_full_width_and_smaller_below_it():
    traces = sampled_traces(9, width=3, nodes=12)
    rows = np.arange(traces.positions)
    for depth, size in ((3, 6), (5, 12)):
        d, v = np.full(len(rows), depth), np.full(len(rows), size)
        nodes, tail = traces.pruned_tails(rows, d, v, np.full(len(rows), 3))
        np.testing.assert_array_equal(tail, traces._tail(rows, d, v))
        inside = np.cumsum(traces.node_depth < depth, axis=1)[:, -1]
        np.testing.assert_array_equal(nodes, np.minimum(size, inside))
        one, chain = traces.pruned_tails(rows, d, v, np.ones(len(rows), dtype=np.int64))
        assert np.all(one <= depth) and np.all(one <= nodes) and (one < nodes).any()  # k = 1: one chain
        assert np.all(chain <= tail + 1e-6)
        drawn = traces.verify(rows, d, v, np.random.default_rng(0), np.ones(len(rows), dtype=np.int64))
        assert np.array_equal(drawn[0], one) and np.all(drawn[1] < one)
    with pytest.raises(SimspecError, match="sampled traces"):
        random_traces(0).verify(rows[:3], d[:3], v[:3], np.random.default_rng(0), np.ones(3))


def test_tails_are_each_verified_sets_acceptance_law():
    traces = sampled_traces(3, nodes=9)
    tails = traces.tails()
    for p in range(0, traces.positions, 7):
        real = traces.node_depth[p] <= DEPTH_MAX
        depth, parent, prob = (a[p][real] for a in (traces.node_depth, traces.node_parent, traces.node_prob))
        reach = reach_probabilities(np.maximum(parent, 0), prob)
        for d_levels in range(2, DEPTH_MAX + 1):
            for size in range(1, 10):
                law = at_least(reach, depth, verified_mask(depth, d_levels, size), DEPTH_MAX)
                np.testing.assert_allclose(tails[p, d_levels - 2, size - 1], law, atol=1e-6)


def test_drawn_acceptance_follows_the_law_and_a_wrong_law_is_rejected():
    traces = sampled_traces(4)
    rng = np.random.default_rng(0)
    row = int(np.argmax(traces.expected_accepted(np.arange(traces.positions), np.full(traces.positions, 5),
                                                 np.full(traces.positions, 8))))
    n = 20000
    one = lambda d, v: (np.full(n, row), np.full(n, d), np.full(n, v))  # noqa: E731
    drawn = traces.accepted(*one(5, 8), rng)
    law = traces.accepted_distribution(np.array([row]), np.array([5]), np.array([8]))[0]
    counts = {a: int((drawn == a).sum()) for a in range(DEPTH_MAX)}
    assert g_test(counts, {a: law[a] for a in range(DEPTH_MAX) if law[a] > 0}, n) > PASS
    assert drawn.mean() == pytest.approx(float(law @ np.arange(DEPTH_MAX)), abs=0.05)
    assert traces.expected_accepted(np.array([row]), np.array([5]), np.array([8]))[0] == \
        pytest.approx(float(law @ np.arange(DEPTH_MAX)), abs=1e-6)
    smaller = traces.accepted_distribution(np.array([row]), np.array([5]), np.array([3]))[0]  # power: V = 3's law
    assert g_test(counts, {a: smaller[a] for a in range(DEPTH_MAX) if smaller[a] > 0}, n) < FAIL


class FirstCycles(StaticPolicy):
    """A static tree that remembers each prompt's first accepted length."""

    def reset_batch(self, n: int) -> None:
        super().reset_batch(n)
        self.first = np.full(n, -1)

    def observe_batch(self, rows, depth, size, accepted) -> None:
        fresh = rows[self.first[rows] < 0]
        self.first[fresh] = accepted[np.isin(rows, fresh)]


def test_replay_is_seeded_and_draws_each_cycle_from_its_trees_law():
    traces, cost = sampled_traces(5), cost_model()
    a = replay(traces, cost, StaticPolicy(4, 2, 6), seed=1)
    assert np.array_equal(a.tokens, replay(traces, cost, StaticPolicy(4, 2, 6), seed=1).tokens)
    assert np.array_equal(a.seconds, replay(traces, cost, StaticPolicy(4, 2, 6), seed=1).seconds)
    runs = 1500  # independent replays of every prompt, drawn as the rows of one replay call
    policy = FirstCycles(4, 2, 6)
    replay(traces, cost, policy, seed=0, draws=runs)
    firsts = policy.first.reshape(runs, -1)  # [runs, prompts]: every prompt's first cycle is rooted at its position 0
    assert len({tuple(f) for f in firsts[:20]}) > 1
    starts = traces.prompt_offsets[:-1]
    expected = traces.expected_accepted(starts, np.full(len(starts), 4), np.full(len(starts), 6))
    spread = firsts.std(0) / np.sqrt(runs) + 1e-3
    assert np.all(np.abs(firsts.mean(0) - expected) < 4.5 * spread), (firsts.mean(0), expected)


def test_replay_caps_the_verified_size_at_the_traces_nodes():
    traces, cost = sampled_traces(6, nodes=8), cost_model()
    capped, asked = (replay(traces, cost, StaticPolicy(6, 2, v), seed=3) for v in (8, 40))
    assert np.array_equal(capped.tokens, asked.tokens) and np.allclose(capped.seconds, asked.seconds)


def test_the_oracle_minimises_expected_time():
    traces, cost = sampled_traces(7), cost_model()
    best = oracle(traces, cost)
    for depth, size in ((2, 2), (4, 6), (6, 8)):
        mean = replay(traces, cost, StaticPolicy(depth, 2, size), seed=0, draws=2400).seconds  # 2400 draws' mean
        assert best.seconds.sum() <= mean.sum() * 1.01, (depth, size)
    # the oracle in expectation is not the oracle of one draw: it cannot see which draws come
    assert np.all(best.seconds > 0)


def test_sampled_traces_round_trip_and_greedy_hashes_stay_as_version_1_wrote_them(tmp_path):
    traces = sampled_traces(8)
    content = save_traces(tmp_path / "s", traces)
    again = load_traces(tmp_path / "s")
    assert again.content_hash() == content and again.temperature == 1.0 and again.nodes == 8
    np.testing.assert_array_equal(again.tails(), traces.tails())
    meta = json.loads((tmp_path / "s" / "traces.json").read_text())
    assert meta["schema_version"] == 2 and meta["temperature"] == 1.0

    greedy = random_traces(0)
    digest = hashlib.sha256()
    for name in ARRAYS:
        array = np.ascontiguousarray(getattr(greedy, name))
        digest.update(f"{name}:{array.dtype}:{array.shape}".encode())
        digest.update(array.tobytes())
    assert greedy.content_hash() == digest.hexdigest()[:16]  # shipped v1 traces keep their hashes


def test_a_sampled_trace_file_without_a_tree_is_refused(tmp_path):
    traces = sampled_traces(9)
    save_traces(tmp_path / "s", traces)
    blob = dict(np.load(tmp_path / "s" / "traces.npz"))
    blob["node_parent"] = np.where(blob["node_parent"] >= 0, blob["node_parent"] + 40, -1).astype(np.int16)
    np.savez_compressed(tmp_path / "s" / "traces.npz", **blob)
    with pytest.raises(SimspecError, match="node_parent"):
        load_traces(tmp_path / "s", verify_hash=False)
    for name in ("node_prob", "node_depth"):
        np.savez_compressed(tmp_path / "s" / "traces.npz", **{k: v for k, v in blob.items() if k != name})
        with pytest.raises(SimspecError, match="node arrays"):
            load_traces(tmp_path / "s", verify_hash=False)


def test_node_labels_at_t1_are_reach_probabilities_that_sum_to_each_top_v_sets_expected_length():
    """C2T's and the Bayes rule's node labels at T > 0 (``sim.labels.reach_by_slot``): each node
    of the full tree labelled by the probability that the walk reaches it, found by its level
    and rank. Over the best V nodes in the classifiers' order they sum to the expected accepted
    length the replay charges; the same labels with each level's ranks reversed do not."""
    from helpers import ROOT

    from simspec.sim.labels import node_examples, reach_by_slot
    from simspec.sim.profile import load_profile

    traces = load_profile(ROOT / "calibration" / "cpu-demo-T1").traces()
    rows = np.arange(0, traces.positions, 5)
    reach = reach_by_slot(traces, rows)
    scores = traces.level_scores[rows].astype(np.float32)
    order = np.argsort(-np.where(np.isfinite(scores), scores, -np.inf).reshape(len(rows), -1), axis=1,
                       kind="stable")
    line = np.arange(len(rows))[:, None]
    full = np.full(len(rows), traces.depth_max)
    for size in (2, 8, 24, traces.nodes):
        expected = traces.expected_accepted(rows, full, np.full(len(rows), size))
        labelled = np.nansum(reach.reshape(len(rows), -1)[line, order[:, :size - 1]], axis=1)
        reversed_ranks = np.nansum(reach[:, :, ::-1].reshape(len(rows), -1)[line, order[:, :size - 1]], axis=1)
        # float16 scores tie across levels now and then: the engine's order may swap two nodes there
        assert np.mean(np.abs(labelled - expected) < 1e-5) > 0.97, size  # the tails are float32
        assert np.median(np.abs(labelled - expected)) < 1e-5 < np.median(np.abs(reversed_ranks - expected)), size
    x, y, w = node_examples(traces, positions=500)
    assert len(x) == len(y) == len(w) and 0 <= y.min() and y.max() <= 1 and 0 < y.mean() < 0.5


def test_a_queue_replays_sampled_traces_as_its_prompts_alone_on_average():
    """On traces recorded at T > 0 each cycle's acceptance is drawn from its tree's law, whether a
    prompt is its own queue or one of a queue through one row: the queue's mean cycles and
    seconds over many draws are its prompts', its plain decoding exactly theirs; one seed, one
    replay."""
    traces, cost, policy = sampled_traces(5), cost_model(), StaticPolicy(4, 2, 6)
    one_queue = np.arange(traces.n_prompts)[None, :]
    alone = replay(traces, cost, policy, seed=0, draws=400)
    queue = replay(traces, cost, policy, seed=0, draws=400, prompts=one_queue)
    assert queue.cycles[0] == pytest.approx(alone.cycles.sum(), rel=0.02)
    assert queue.seconds[0] == pytest.approx(alone.seconds.sum(), rel=0.02)
    assert queue.greedy_seconds[0] == pytest.approx(alone.greedy_seconds.sum(), rel=1e-9)
    assert np.array_equal(queue.tokens, alone.tokens)
    once = [replay(traces, cost, policy, seed=s, draws=1, prompts=one_queue) for s in (1, 1, 2, 3, 4, 5)]
    assert (once[0].seconds, once[0].cycles) == (once[1].seconds, once[1].cycles)
    assert len({int(r.cycles[0]) for r in once}) > 1
