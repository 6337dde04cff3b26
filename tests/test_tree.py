"""The draft tree's bookkeeping, on synthetic draft outputs (no model needed)."""

import numpy as np
import pytest

from simspec.engine.tree import DraftTree, select_nodes
from simspec.errors import SimspecError
from simspec.policies import DraftPlan, tree_capacity


def grow_random_tree(depth: int, width: int, seed: int = 0, vocab: int = 50) -> DraftTree:
    rng = np.random.default_rng(seed)
    tree = DraftTree(root_token=7, depth_cap=depth, width=width)
    while tree.levels < depth:
        n_frontier = len(tree.frontier)
        if tree.levels > 1:
            tree.feed_frontier()
        logits = rng.normal(size=(n_frontier, vocab))
        logprobs = logits - np.log(np.exp(logits).sum(1, keepdims=True))
        top = np.argsort(-logprobs, axis=1)[:, :width]
        tree.grow(np.take_along_axis(logprobs, top, 1), top)
    return tree


@pytest.mark.parametrize("depth,width", [(1, 1), (2, 1), (2, 10), (3, 4), (8, 10), (12, 10), (12, 1)])
def test_node_count_is_ltds(depth, width):
    tree = grow_random_tree(depth, width)
    assert tree.n == tree_capacity(depth, width)
    if depth >= 2:
        assert tree.n == 1 + width + (depth - 2) * width**2
    assert tree.levels == depth
    assert tree.depths[: tree.n].max() == depth - 1


def test_frontier_is_best_of_level_and_parents_are_previous_frontier():
    tree = grow_random_tree(5, 4, seed=3)
    level = tree.depths[: tree.n] == 4
    best = np.sort(np.flatnonzero(level)[np.argsort(-tree.scores[: tree.n][level], kind="stable")[:4]])
    np.testing.assert_array_equal(tree.frontier, best)
    # every node at depth k >= 2 hangs off a node of depth k-1
    for i in range(1, tree.n):
        assert tree.depths[tree.parents[i]] == tree.depths[i] - 1


@pytest.mark.parametrize("seed", range(20))
def test_selection_is_closed_under_ancestors(seed):
    tree = grow_random_tree(6, 5, seed=seed)
    rng = np.random.default_rng(seed)
    size = int(rng.integers(1, tree.n + 1))
    rows = select_nodes(tree.scores[: tree.n], size)
    assert len(rows) == size and rows[0] == 0
    chosen = set(rows.tolist())
    assert all(tree.parents[r] in chosen for r in rows[1:])


def test_selection_ties_prefer_shallower_nodes():
    scores = np.array([0.0, -1.0, -1.0, -1.0, -1.0], dtype=np.float32)
    np.testing.assert_array_equal(select_nodes(scores, 3), [0, 1, 2])


def test_accept_follows_the_target_and_returns_bonus():
    tree = grow_random_tree(4, 3, seed=1)
    ver = tree.verification(tree.n)
    # target agrees with the path root -> row a -> row b, then says 999
    a = next(r for r in range(1, len(ver)) if ver.depths[r] == 1)
    b = next(r for r in range(1, len(ver)) if ver.parent_rows[r - 1] == a)
    target_next = np.full(len(ver), 999)
    target_next[0] = ver.tokens[a]
    target_next[a] = ver.tokens[b]
    rows, bonus = ver.accept(target_next)
    np.testing.assert_array_equal(rows, [0, a, b])
    assert bonus == 999


def test_accept_nothing():
    tree = grow_random_tree(3, 2)
    ver = tree.verification(5)
    rows, bonus = ver.accept(np.full(len(ver), 12345))
    np.testing.assert_array_equal(rows, [0])
    assert bonus == 12345


def test_frontier_visibility_is_ancestry():
    tree = grow_random_tree(3, 3)
    tokens, depth, visible = tree.feed_frontier()
    assert depth == 2 and visible.shape == (3, 3 + 3)  # 3 fed level-1 nodes + 3 new
    for i, node in enumerate(tree.frontier):
        slots = np.concatenate([tree._fed[0], tree.frontier])
        expected = [tree.ancestors[node, s] for s in slots]
        assert visible[i].tolist() == expected
        assert visible[i].sum() == 2  # its parent and itself


@pytest.mark.parametrize("field", ["depth", "width", "size"])
def test_plan_rejects_non_positive(field):
    kwargs = {"depth": 3, "width": 2, "size": 4, field: 0}
    with pytest.raises(SimspecError, match=f"{field} must be"):
        DraftPlan(**kwargs)
