"""C2T: the node classifier's features and labels, what it learns on the shipped traces, its
pruning, lossless decoding on both engines, and the baseline through the CLI."""

from __future__ import annotations

import numpy as np
import pytest

from simspec.policies.rules.c2t import C2T, node_features
from simspec.policies.stopping import AcceptancePredictor


def test_node_features_describe_each_node_of_its_level():
    scores = np.full((1, 2, 4), -np.inf)
    scores[0, 0, :2] = [-0.1, -2.5]
    scores[0, 1] = [-0.3, -1.0, -2.6, -4.0]
    features, valid = node_features(scores, depth_max=4)
    assert valid.tolist() == [[True, True, False, False, True, True, True, True]]
    f = features[0]
    assert f[:, 0][valid[0]].tolist() == pytest.approx([-0.1, -2.5, -0.3, -1.0, -2.6, -4.0])  # joint log-prob
    assert f[[0, 4], 1].tolist() == pytest.approx([0.25, 0.5])  # depth / depth_max
    assert f[[1, 5], 2].tolist() == pytest.approx([-2.4, -0.7])  # gap to the level's best
    probs = np.exp(np.array([-0.1, -2.5]))
    probs /= probs.sum()
    assert f[0, 3] == pytest.approx(-(probs * np.log(probs)).sum())  # the level's renormalised entropy
    assert f[0, 3] == f[1, 3]


class _Fixed:
    """A classifier whose answer is the joint probability itself."""

    def predict(self, features):
        return np.exp(features[:, 0])


def test_c2t_verifies_the_root_and_the_nodes_it_keeps_never_more_than_planned():
    scores = np.full((3, 2, 4), -np.inf)
    scores[:, 0, :2] = [[-0.1, -2.0], [-3.0, -4.0], [-0.05, -0.2]]
    scores[:, 1] = [[-0.2, -2.2, -3, -5], [-3.5, -4, -5, -6], [-0.1, -0.3, -0.3, -0.4]]
    sizes = [C2T(_Fixed(), t, 2, 3, 4).choose_size_batch(np.arange(3), np.full(3, 3), scores, np.full(3, 6))
             for t in (0.5, 0.1, 1e-9)]
    assert sizes[0].tolist() == [3, 1, 6]  # p >= 0.5: two nodes, none, all six (capped at the plan)
    assert sizes[1].tolist() == [5, 1, 6]
    assert (sizes[2] == 6).all()
    depth, size = C2T(_Fixed(), 0.2, 10, 4, 12).plan_batch(np.arange(2), np.zeros(2))
    assert depth.tolist() == [4, 4] and size.tolist() == [211, 211]  # the whole tree may be kept


def _auc(p: np.ndarray, y: np.ndarray) -> float:
    order = np.argsort(p)
    ranks = np.empty(len(p))
    ranks[order] = np.arange(1, len(p) + 1)
    pos = y > 0.5
    return float((ranks[pos].sum() - pos.sum() * (pos.sum() + 1) / 2) / (pos.sum() * (~pos).sum()))


def test_the_node_classifier_learns_which_nodes_lie_on_the_greedy_path():
    """Fitted on 300 of the shipped mixed traces' positions, it ranks 300 others' path nodes above
    the rest (AUC > 0.85); the same fit on shuffled labels does not reach that bar (the test's power)."""
    from helpers import ROOT

    from simspec.sim.labels import node_examples
    from simspec.sim.trace_files import load_traces

    traces = load_traces(ROOT / "calibration" / "traces-mix-eagle")
    fit_rows, test_rows = np.sort(np.random.default_rng(0).permutation(traces.positions)[:600].reshape(2, 300), axis=1)
    x, y, w = node_examples(traces, rows=fit_rows)
    assert 0.02 < y.mean() < 0.2 and x.shape[1] == 4
    x2, y2, _ = node_examples(traces, rows=test_rows)  # positions the fit never saw
    fitted = AcceptancePredictor.fit(x, y, w, steps=150, seed=0)
    assert _auc(fitted.predict(x2), y2) > 0.85, _auc(fitted.predict(x2), y2)
    shuffled = AcceptancePredictor.fit(x, np.random.default_rng(0).permutation(y), w, steps=150, seed=0)
    assert _auc(shuffled.predict(x2), y2) < 0.85  # (a function of features it never learned: 0.71 here)


@pytest.mark.parametrize("batch", [1, 3])
def test_c2t_decodes_losslessly_alone_and_in_batches(batch, tiny, drafters):
    from helpers import decode_alone_or_batched, tiny_prompts

    policy = C2T(_Fixed(), 0.006, 3, 5, 8)
    outputs, reference, cycles = decode_alone_or_batched(tiny, drafters["eagle3"], policy, tiny_prompts(4), batch)
    assert outputs == reference
    assert len({c.size for c in cycles}) > 1  # the classifier's count varies cycle by cycle


def test_c2t_tunes_and_replays_in_the_simulator(tmp_path):
    from helpers import simulated_rows

    rows = simulated_rows(tmp_path, "c2t")
    assert rows[1]["method"].startswith("c2t(") and rows[1]["speedup"] > 0
