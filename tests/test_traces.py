"""Trace tables against the engine's own selection and acceptance, on random trees (no models)."""

from __future__ import annotations

import numpy as np
import pytest

from simspec.errors import SimspecError
from simspec.measure.recorder import tree_tables
from simspec.sim.traces import PromptTrace, assemble
from simspec.engine.tree import DraftTree
from simspec.sim.traces import accepted_lengths, load_traces, save_traces

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


def _tiny_traceset():
    rng = np.random.default_rng(0)
    traces = []
    for n in (3, 5):
        ranks = rng.integers(0, 50, size=(n, 3, 3)).astype(np.int16)
        scores = np.sort(rng.standard_normal((n, 3, 4)).astype(np.float16), axis=2)[:, :, ::-1]
        traces.append(PromptTrace(rng.integers(0, 100, size=n + 4), np.arange(n, dtype=np.int32) + 7, ranks,
                                  scores, scores[:, :, :2].copy(), False))
    return assemble(traces, [7, 9], {"depth_max": 4, "width": 2, "target": "t", "draft": "d",
                                     "prompt_ids": ["a", "b"]})


def test_round_trip_and_hash(tmp_path):
    traces = _tiny_traceset()
    content = save_traces(tmp_path, traces)
    back = load_traces(tmp_path)
    assert back.content_hash() == content == back.meta["content_hash"]
    assert back.positions == 8 and back.n_prompts == 2
    np.testing.assert_array_equal(back.path_rank, traces.path_rank)
    sub = back.subset(np.array([1]))
    assert sub.positions == 5 and sub.meta["prompt_ids"] == ["b"]


def test_altered_or_foreign_traces_are_refused(tmp_path):
    save_traces(tmp_path, _tiny_traceset())
    meta = (tmp_path / "traces.json").read_text()
    (tmp_path / "traces.json").write_text(meta.replace('"content_hash": "', '"content_hash": "0'))
    with pytest.raises(SimspecError, match="do not match their recorded hash"):
        load_traces(tmp_path)
    (tmp_path / "traces.json").write_text(meta.replace('"schema_version": 1', '"schema_version": 99'))
    with pytest.raises(SimspecError, match="not a simspec-traces v1"):
        load_traces(tmp_path)
    (tmp_path / "traces.json").write_text(meta)
    (tmp_path / "traces.npz").write_bytes(b"not a zip")
    with pytest.raises(SimspecError, match="missing or corrupt"):
        load_traces(tmp_path)
