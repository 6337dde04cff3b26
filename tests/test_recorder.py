"""Trace tables (``tree_tables``, the recorder's) against the engine's own selection and
acceptance, on random trees: no models are loaded, but the recorder's module imports torch."""

from __future__ import annotations

import numpy as np
import pytest

from simspec.engine.tree import DraftTree
from simspec.measure.recorder import tree_tables
from simspec.sim.traces import accepted_lengths

VOCAB = 6  # a tiny vocabulary makes greedy paths deep and ties frequent


def random_tree(rng, depth: int, width: int, ties: bool) -> tuple[DraftTree, list]:
    """A tree grown the engine's way from random log-probs; the same draws give every depth's
    tree as a prefix of the deepest one."""
    tree = DraftTree(0, depth, width)
    draws = []
    for level in range(depth - 1):
        rows = 1 if level == 0 else width
        logprobs = -rng.exponential(1.0, size=(rows, width))
        if ties:
            logprobs = np.round(logprobs, 1)
        logprobs = np.sort(logprobs, axis=1)[:, ::-1]
        tokens = np.stack([rng.permutation(VOCAB)[:width] for _ in range(rows)])
        draws.append((logprobs, tokens))
        if level:
            tree.feed_frontier()
        tree.grow(logprobs, tokens)
    return tree, draws


def engine_accepted(draws, depth: int, width: int, size: int, greedy: np.ndarray) -> int:
    """What a live cycle accepts: build the depth-level tree, verify ``size`` nodes, accept."""
    tree = DraftTree(0, depth, width)
    for level, (logprobs, tokens) in enumerate(draws[: depth - 1]):
        if level:
            tree.feed_frontier()
        tree.grow(logprobs, tokens)
    verification = tree.verification(size)
    # The target's greedy token after each row: the continuation at that row's depth.
    target_next = greedy[verification.depths]
    rows, _ = verification.accept(target_next)
    return len(rows) - 1


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("width", [1, 2, 3])
def test_accepted_lengths_equal_the_engine(width, ties):
    rng = np.random.default_rng(width * 10 + ties)
    depth_max = 6
    for _ in range(40):
        tree, draws = random_tree(rng, depth_max, width, ties)
        greedy = rng.integers(0, VOCAB, size=depth_max + 1)
        if rng.random() < 0.7:  # often make the tree's best path the greedy one, deep acceptance
            node = int(np.argmax(np.where(tree.depths[: tree.n] == depth_max - 1, tree.scores[: tree.n], -np.inf)))
            while node > 0:
                greedy[tree.depths[node] - 1] = tree.tokens[node]
                node = tree.parents[node]
        path_rank, level_scores, best_children = tree_tables(tree, greedy, depth_max)
        for depth in range(1, depth_max + 1):
            for size in (1, 2, 3, 5, 8, 13, 40):
                expected = engine_accepted(draws, depth, width, size, greedy) if depth > 1 else 0
                got = int(accepted_lengths(path_rank[None], depth, size)[0])
                assert got == expected, (depth, size)
        assert np.all(np.diff(np.nan_to_num(level_scores.astype(np.float32), neginf=-1e4), axis=1) <= 0)
        # Level 1's best children are the root's children: conditional = cumulative there.
        np.testing.assert_allclose(best_children[0].astype(np.float32), level_scores[0, :width].astype(np.float32))
        assert np.all(best_children <= 0)


def test_vectorised_over_rows_and_configs():
    rng = np.random.default_rng(7)
    tables = []
    for _ in range(30):
        tree, _ = random_tree(rng, 5, 2, False)
        greedy = rng.integers(0, VOCAB, size=6)
        tables.append(tree_tables(tree, greedy, 5)[0])
    ranks = np.stack(tables)
    depth = rng.integers(1, 6, size=30)
    size = rng.integers(1, 20, size=30)
    batched = accepted_lengths(ranks, depth, size)
    one_by_one = [int(accepted_lengths(ranks[i:i + 1], depth[i], size[i])[0]) for i in range(30)]
    assert batched.tolist() == one_by_one
