"""Sequoia's trees: the tree construction against Sequoia's own recursion, trees of fixed shape
in replay and on both engines (lossless, and the recorded child ranks predicting every live
cycle), and the baselines and ``tune`` through the CLI."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from simspec.errors import SimspecError
from simspec.policies.rules.sequoia import SequoiaTree, best_first, non_increasing, positional_acceptance
from simspec.policies.shape import TreeShape
from simspec.sim.traces import NO_NODE


def sequoia_recursion(p: np.ndarray, nodes: int, levels: int) -> float:
    """Sequoia's dynamic program, literally: the most expected accepted drafts of a tree of
    ``nodes`` nodes (root included) and at most ``levels`` levels below the root; a child of rank
    i at depth k is worth p[k - 1, i] times (1 + its subtree's worth)."""
    cap = p.shape[1]

    @cache
    def subtree(n: int, depth: int) -> float:  # a node at ``depth`` heading n nodes
        if n == 1:
            return 0.0
        if depth == levels:
            return -np.inf
        return children(0, n - 1, depth)

    @cache
    def children(rank: int, m: int, depth: int) -> float:  # m nodes left for ranks rank.. of its children
        if m == 0:
            return 0.0
        if rank == cap:
            return -np.inf
        return max(p[depth, rank] * (1 + subtree(s, depth + 1)) + children(rank + 1, m - s, depth)
                   for s in range(1, m + 1))

    return subtree(nodes, 0)


@pytest.mark.parametrize("by_depth", [False, True])
def test_best_first_trees_reach_sequoias_dynamic_program_optimum(by_depth):
    rng = np.random.default_rng(3)
    for _ in range(6):
        rows = 4 if by_depth else 1
        p = np.stack([non_increasing(np.sort(rng.dirichlet(np.ones(5)))[::-1] * rng.uniform(0.5, 1), np.ones(5))
                      for _ in range(rows)])
        p = np.tile(p, (4, 1)) if not by_depth else p
        for levels in (1, 2, 4):
            paths, values = best_first(p, levels, 9)
            for n in range(1, 10):
                best = sequoia_recursion(p, n + 1, levels)
                got = float(values[:n].sum()) if len(paths) >= n else -np.inf
                assert got == pytest.approx(best, abs=1e-12), (n, levels)
                TreeShape(tuple(paths[:n]))  # a tree: parents and better siblings present


def test_the_optimum_needs_acceptance_non_increasing_in_rank():
    """The power of the test above: with p rising in rank (what the pooled estimate never is),
    best-first trees fall short of the recursion's optimum."""
    p = np.tile([0.5, 0.1, 0.9], (3, 1))
    _, values = best_first(p, 3, 3)
    assert values.sum() == pytest.approx(0.875) and sequoia_recursion(p, 4, 3) == pytest.approx(1.5)


def test_acceptance_by_rank_counts_observed_path_nodes():
    ranks = np.array([[0, 0, 1, NO_NODE], [1, NO_NODE, -1, -1], [0, 2, -1, -1]], dtype=np.int16)
    p = positional_acceptance(ranks, cap=4)
    # 9 observations: rank 0 x3, rank 1 x2, rank 2 x1, not among the best four x2
    assert p[0].tolist() == pytest.approx([3 / 8, 2 / 8, 1 / 8, 0])
    assert (p == p[0]).all()
    by_depth = positional_acceptance(ranks, cap=4, by_depth=True)
    assert by_depth[0].tolist() == pytest.approx([2 / 3, 1 / 3, 0, 0])
    assert by_depth[3].tolist() == pytest.approx([0, 0, 0, 0])
    bumpy = non_increasing(np.array([0.5, 0.1, 0.2, 0.0]), np.array([1.0, 1.0, 1.0, 1.0]))
    assert bumpy.tolist() == pytest.approx([0.5, 0.15, 0.15, 0.0])


def naive_accepted(shape: TreeShape, ranks: np.ndarray, depth: int) -> int:
    path: tuple[int, ...] = ()
    for r in ranks[: depth - 1]:
        if r < 0 or path + (int(r),) not in shape.paths:
            break
        path += (int(r),)
    return len(path)


def test_a_shape_replays_the_longest_rank_prefix_it_holds():
    rng = np.random.default_rng(0)
    shape = TreeShape.of([[0], [1], [2], [0, 0], [0, 1], [1, 0], [0, 0, 0], [0, 1, 0], [0, 0, 0, 0]])
    assert shape.size == 10 and shape.depth == 5 and shape.max_children == 3
    assert shape.parents.tolist() == [-1, 0, 0, 0, 1, 1, 2, 4, 5, 7]
    assert shape.fed.tolist() == [2, 2, 1]  # levels 1, 2, 3: nodes with children
    assert shape.nodes_within(np.array([1, 2, 3, 4, 9])).tolist() == [1, 4, 7, 9, 10]
    assert shape.branching() is None and TreeShape.of([[0], [1], [0, 0], [1, 0]]).branching() == [2, 1]
    ranks = np.where(rng.random((500, 6)) < 0.5, 0, rng.integers(1, 5, (500, 6))).astype(np.int16)
    ranks[rng.random((500, 6)) < 0.1] = NO_NODE
    depth = rng.integers(1, 7, 500)
    got = shape.accepted(ranks, depth)
    assert got.tolist() == [naive_accepted(shape, r, d) for r, d in zip(ranks, depth)]
    assert got.max() == 4


@pytest.mark.parametrize("bad", [[[0], [0]], [[1]], [[0, 0]], [[]]])
def test_a_shape_that_is_not_a_tree_is_refused(bad):
    with pytest.raises(SimspecError, match="tree shape"):
        TreeShape.of(bad)


def test_the_live_tree_grows_the_shape_node_for_node():
    from simspec.engine.tree import ShapedTree

    shape = TreeShape.of([[0], [1], [2], [0, 0], [0, 1], [1, 0], [0, 0, 0], [0, 1, 0], [0, 0, 0, 0]])
    tree = ShapedTree(5, 12, shape)
    step = 0
    while tree.levels < shape.depth:
        if step:
            tree.feed_frontier()
        k = len(tree.frontier)
        tree.grow(-np.arange(k * 3, dtype=np.float32).reshape(k, 3) / 10, np.arange(k * 3).reshape(k, 3) + 100 * step)
        step += 1
    assert tree.n == shape.size
    assert tree.parents[1:tree.n].tolist() == shape.parents[1:].tolist()
    assert tree.verification(shape.size).nodes.tolist() == list(range(shape.size))
    assert ShapedTree(5, 3, shape).levels == 1 and ShapedTree(5, 3, shape).shape.size == 10


SHAPE = [[0], [1], [2], [0, 0], [0, 1], [1, 0], [0, 0, 0], [0, 1, 0], [0, 0, 0, 0]]


@pytest.mark.parametrize("batch", [1, 3])
def test_a_tree_of_fixed_shape_decodes_losslessly_alone_and_in_batches(batch, tiny, drafters):
    from helpers import TINY_VOCAB

    from simspec.engine.speculative import SpeculativeEngine

    rng = np.random.default_rng(2)
    prompts = [[int(x) for x in rng.integers(0, TINY_VOCAB, size=int(rng.integers(3, 12)))] for _ in range(3)]
    policy = SequoiaTree(TreeShape.of(SHAPE))
    for name in ("eagle3", "lm") if batch == 1 else ("eagle3",):  # the batch engine drafts alike for both
        single = SpeculativeEngine(tiny, drafters[name])
        reference = [single.greedy(p, 24).tokens for p in prompts]
        if batch == 1:
            runs = [single.generate(p, policy, 24) for p in prompts]
            outputs = [g.tokens for g in runs]
            sizes = {c.size for g in runs for c in g.cycles}
        else:
            run = SpeculativeEngine(tiny, drafters[name], batch_size=batch).decode(prompts, policy, 24)
            outputs = [g.tokens for g in run.generations]
            sizes = {c.size for g in run.generations for c in g.cycles}
        assert outputs == reference, (name, batch)
        assert sizes == {policy.shape.size}, sizes  # the engine verified exactly the shape, every cycle


def test_recorded_child_ranks_predict_every_live_cycle_of_a_shaped_tree(tiny, drafters):
    """What replay reads (the recorder's child ranks) is what the engine does with a tree of that
    shape: each live cycle's accepted drafts, position by position."""
    from helpers import TINY_VOCAB

    from simspec.engine.speculative import SpeculativeEngine
    from simspec.measure.recorder import RecordSpec, TraceRecorder

    rng = np.random.default_rng(5)
    shape = TreeShape.of(SHAPE)
    accepted = {}
    for name in ("eagle3", "lm"):
        recorder = TraceRecorder(tiny, drafters[name], RecordSpec(depth_max=6, width=3, max_new_tokens=30))
        engine = SpeculativeEngine(tiny, drafters[name])
        cycles, accepted[name] = 0, 0
        for _ in range(2):
            prompt = [int(x) for x in rng.integers(0, TINY_VOCAB, size=6)]
            continuation = engine.greedy(prompt, 30 + 6).tokens
            trace = recorder.record(prompt, continuation)
            again = recorder.child_ranks(prompt, trace.continuation, len(trace.context_length))
            assert (again == trace.child_rank).all()  # the augmenting walk equals the recording one
            live = engine.generate(prompt, SequoiaTree(shape), 30)
            position = 0
            for c in live.cycles:
                if position >= len(trace.child_rank):
                    break
                assert c.accepted == shape.accepted(trace.child_rank[position:position + 1], shape.depth)[0], \
                    (name, position)
                position += c.accepted + 1
                cycles, accepted[name] = cycles + 1, accepted[name] + c.accepted
        assert cycles > 12
    assert accepted["lm"] > 0, accepted  # the draft LM's drafts accepted (the random head's: rejected)


def test_sequoia_baselines_validate_and_tune_in_the_simulator(tmp_path):
    from helpers import cli, last_json, synthetic_profile, tagged_traces

    profile = synthetic_profile(tmp_path, tagged_traces(4), policy_seconds={"static": 1e-6})
    result = cli("validate", "--simulated", "--profile", profile, "--baselines", "grid,sequoia,sequoia-depth", "--json")
    assert result.returncode == 0, result.stderr
    rows = {r["method"].split("(")[0]: r for r in last_json(result)["rows"]}
    assert rows["sequoia"]["speedup"] > 0 and rows["sequoia-depth"]["tau"] >= 1
    for engine, expect in (("eagle", "tree_choices"), ("vllm", ""), ("sglang", "SGLang cannot")):
        result = cli("tune", "--profile", profile, "--engine", engine, "--json")
        assert result.returncode == 0, result.stderr
        sequoia = last_json(result)["sequoia"]
        assert sequoia["nodes"] == len(sequoia["tree"]) + 1 and expect in sequoia["flags"]
        assert (sequoia["settings"] is None) == (engine == "sglang" or (engine == "vllm" and "cannot" in
                                                                         sequoia["flags"]))


def test_sequoia_on_traces_without_child_ranks_is_one_line(tmp_path):
    from helpers import cli, synthetic_profile, tagged_traces

    traces = tagged_traces(4)
    traces.child_rank = np.zeros((traces.positions, 0), np.int16)
    profile = synthetic_profile(tmp_path, traces, policy_seconds={"static": 1e-6})
    result = cli("validate", "--simulated", "--profile", profile, "--baselines", "sequoia")
    assert result.returncode == 2
    assert "hold no child ranks" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_queue_through_one_row_prices_a_shaped_tree_as_its_prompts_alone():
    """At batch 1 a queue of sequences is its sequences one after another: the shaped tree's
    draft steps (each level's expanded nodes) cost the same either way."""
    from helpers import cost_model, random_traces

    from simspec.sim.replay import replay

    traces, cost = random_traces(2), cost_model()
    policy = SequoiaTree(TreeShape.of([[0], [1], [0, 0], [0, 1], [0, 0, 0]]))
    alone = replay(traces, cost, policy)
    queued = replay(traces, cost, policy, prompts=np.arange(traces.n_prompts)[None, :])
    assert queued.seconds[0] == pytest.approx(float(alone.seconds.sum()))
    assert queued.prefill_seconds[0] == pytest.approx(float(alone.prefill_seconds.sum()))
    assert queued.tokens.sum() == alone.tokens.sum()
