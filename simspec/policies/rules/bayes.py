"""Bayes decisions over the drafted tree: simspec's own rule (numpy only).

Verifying the best V nodes by score (a set closed under ancestors) accepts exactly the verified
nodes on the target's greedy path, so a cycle's expected tokens are ``1 + sum of P(node on
path)``: marginals suffice, no independence is assumed (C2T's node classifier gives them). A
throughput maximiser trades tokens for seconds at a rate lambda (Dinkelbach: the optimal rate
makes ``tokens - lambda * seconds`` the per-cycle objective), seconds priced on the curves:

- size: ``argmax_V  1 + P_1 + ... + P_{V-1} - lambda * verify(V, L)``;
- depth: the next levels are expected to add the best objective's last increment, shrunk per
  level by the newest level's mass ratio; drafting goes on while some lookahead of k levels
  pays its k draft steps.

``lambda = kappa / verify(1, L)``: kappa is the speedup aimed at (tuned on the train split). In a
batch (B > 1) the rows decide together, one forward drafting and one verifying them all: the
batch drafts on while the rows' *summed* gains pay, and verifies the one size that maximises
their summed expected tokens less the batch's rate times ``verify`` at B. ``simspec.sim.bound``
grants the size decision the whole tree for free to bound any policy observing node scores.
"""

from __future__ import annotations

import numpy as np

from simspec.policies.base import BatchPolicy, Costs, tree_capacity
from simspec.policies.registry import RuleContext, register_baseline
from simspec.policies.rules.c2t import node_features


def node_probabilities(predictor, tree_scores: np.ndarray, depth_max: int, first_level: np.ndarray | None = None,
                       extra: np.ndarray | None = None) -> np.ndarray:
    """P(node on the greedy path) per node of ``[rows, levels, W**2]`` trees, 0 on padding;
    ``first_level`` (0-based, per row) places a one-level slice at its true depth; ``extra``
    (``[rows, k]``) joins each row's own features to every node's."""
    features, valid = node_features(tree_scores, depth_max)
    if first_level is not None:
        features[:, :, 1] += (np.asarray(first_level)[:, None]) / depth_max
    if extra is not None:
        features = np.concatenate([features, np.broadcast_to(extra[:, None, :], (*valid.shape, extra.shape[1]))], 2)
    p = predictor.predict(features.reshape(-1, features.shape[-1])).reshape(valid.shape)
    return np.where(valid, p, 0.0)


def expected_tokens(p: np.ndarray, scores: np.ndarray, keep: np.ndarray | None = None) -> np.ndarray:
    """``[rows, n + 1]``: expected tokens of a cycle verifying 1..n+1 nodes (the root, then nodes
    best score first, ties to the shallower, as the engines take them), from per-node path
    probabilities ``p`` over ``scores`` flattened alike; ``keep`` masks nodes out of reach."""
    flat = scores.reshape(len(scores), -1)
    mask = np.isfinite(flat) if keep is None else keep & np.isfinite(flat)
    order = np.argsort(np.where(mask, -flat, np.inf), axis=1, kind="stable")
    ranked = np.take_along_axis(np.where(mask, p, 0.0), order, axis=1)
    n = int(mask.sum(axis=1).max(initial=0))
    return 1.0 + np.concatenate([np.zeros((len(flat), 1)), np.cumsum(ranked[:, :n], axis=1)], axis=1)


PRIOR_KAPPA, PRIOR_CYCLES = 1.5, 8  # the auto rate's prior: 8 plain steps' worth of time at 1.5x


class BayesTree(BatchPolicy):
    """The rule at rate ``kappa / verify(1, L)``, or with ``kappa=None`` each sequence's own tokens per
    second so far (Dinkelbach's iteration, online) times the batch size. A fixed kappa is tuned
    where it runs (on the batch's curves), so it is not scaled."""

    def __init__(self, predictor, cost: Costs, kappa: float | None, width: int, depth_max: int,
                 lookahead: int = 3) -> None:
        self.predictor, self.cost, self.kappa, self.lookahead = predictor, cost, kappa, lookahead
        self.width, self.depth_max = width, depth_max
        self.name = "bayes(auto)" if kappa is None else f"bayes(kappa={kappa:g})"

    def reset_batch(self, n):
        # a batch-1 model holding curves at this batch size prices the batch's cycles with them; a
        # model already at a batch size (validate --batch-size builds rules with one) as it is
        held = self.batch_size > 1 and self.batch_size in getattr(self.cost, "batch_sizes", ())
        self.curves = self.cost.at_batch(self.batch_size) if held else self.cost
        self.rate, self.context = np.zeros(n), np.zeros(n, np.int64)
        self.best, self.mass = np.zeros(n), np.ones(n)
        self.tokens, self.seconds, self.committed = np.zeros(n), np.zeros(n), np.ones(n, np.int64)
        shape = (n, self.depth_max - 1, self.width * self.width)
        self.tree, self.prob = np.full(shape, -np.inf, np.float32), np.zeros(shape)

    def _verify_seconds(self, sizes: np.ndarray, context: np.ndarray) -> np.ndarray:
        """verify(sizes, context) as ``[rows, len(sizes)]``: looked up in the curve's integer table
        where the cost model keeps one (replay's hot path and the engine's), else evaluated."""
        table = getattr(self.curves, "table", None)
        grid = None if table is None else table("verify", int(sizes.max()), int(context.max(initial=0)))
        if grid is None:
            return self.curves.verify(sizes[None, :].astype(float), context[:, None].astype(float))
        return grid[sizes[None, :], context[:, None]]

    def plan_batch(self, rows, context):
        context = np.asarray(context).astype(np.int64)
        self.context[rows] = context
        plain = self._verify_seconds(np.ones(1, np.int64), context)[:, 0]  # the root alone: a plain step
        if self.kappa is None:  # the batch's rate: a batch second is paid by all B rows' tokens
            self.rate[rows] = self.batch_size * ((self.tokens[rows] + PRIOR_CYCLES * PRIOR_KAPPA)
                                                 / (self.seconds[rows] + PRIOR_CYCLES * plain))
        else:
            self.rate[rows] = self.kappa / plain
        self.best[rows] = 1.0 - self.rate[rows] * plain  # J of the root alone: 1 token less its priced seconds
        self.mass[rows] = 1.0
        self.tree[rows], self.prob[rows] = -np.inf, 0.0
        return np.full(len(rows), self.depth_max), np.full(len(rows), tree_capacity(self.depth_max, self.width))

    def _objective(self, rows, scores, p):
        """(best J, its size) of trees ``[rows, levels, W**2]`` with node probabilities ``p``."""
        gain = expected_tokens(p.reshape(len(rows), -1), scores)
        seconds = self._verify_seconds(np.arange(1, gain.shape[1] + 1), self.context[rows])
        objective = gain - self.rate[rows][:, None] * seconds
        return objective.max(axis=1), objective.argmax(axis=1) + 1

    def _batch_rate(self, rows) -> float:
        """The tokens per second the deciding rows earn together: a fixed kappa's rate is per row; the
        auto rate is B times a row's, so B rows' sum is B times the batch's (fewer rows at a queue's
        tail earn less)."""
        total = float(self.rate[rows].sum())
        return total if self.kappa is not None else total / self.batch_size

    def _batch_objective(self, rows, scores, p) -> tuple[float, int]:
        """(best J, its size) of one forward verifying every row at one size, padded alike: the rows'
        expected tokens summed, less the batch's rate times ``verify`` at the longest context."""
        gain = expected_tokens(p.reshape(len(rows), -1), scores).sum(axis=0)
        seconds = self._verify_seconds(np.arange(1, len(gain) + 1), self.context[rows].max(keepdims=True))[0]
        objective = gain - self._batch_rate(rows) * seconds
        return float(objective.max()), int(objective.argmax()) + 1

    def keep_drafting_batch(self, rows, depth, frontier, planned):
        level = np.asarray(depth) - 2  # the level just drafted, 0-based below the root
        frontier = np.asarray(frontier, np.float32)
        p = node_probabilities(self.predictor, frontier[:, None, :], self.depth_max, level)
        self.tree[rows, level], self.prob[rows, level] = frontier, p
        best, _ = self._objective(rows, self.tree[rows], self.prob[rows])
        increment = np.maximum(best - self.best[rows], 0.0)
        mass = p.sum(axis=1)
        ratio = np.clip(mass / np.maximum(self.mass[rows], 1e-6), 0.0, 1.0)
        self.best[rows], self.mass[rows] = best, mass
        step = self.curves.draft(np.full(len(rows), float(self.width)), self.context[rows])
        gain, pays = np.zeros(len(rows)), np.zeros(len(rows), bool)
        joint = self.batch_size > 1 and len(rows) > 1
        for k in range(1, self.lookahead + 1):
            gain += increment * ratio ** k
            if joint:
                # one forward drafts every row's next level: the rows' gains together pay for it. Each
                # row values the level by its own best tree priced at the batch's rate, as if it paid
                # the batch's verification alone: conservative, and on the train split 0-4 % ahead of
                # valuing it by the batch's shared-size objective (which drafts deeper)
                pays |= gain.sum() > k * self._batch_rate(rows) * step.max()
            else:
                pays |= gain > k * self.rate[rows] * step
        return pays & (depth < planned)

    def choose_size_batch(self, rows, depth, tree_scores, planned):
        scores = np.asarray(tree_scores, np.float32)
        p = node_probabilities(self.predictor, scores, self.depth_max)
        if self.batch_size > 1 and len(rows) > 1:  # one forward verifies every row at one size
            size = np.full(len(rows), self._batch_objective(rows, scores, p)[1])
        else:
            _, size = self._objective(rows, scores, p)
        return np.minimum(size, planned)

    def observe_batch(self, rows, depth, size, accepted, **_):
        # the rate's history: tokens, and the seconds the curves price the cycle at
        self.tokens[rows] += np.asarray(accepted) + 1
        self.seconds[rows] += self.curves.cycle(np.asarray(depth), self.width, np.asarray(size),
                                                self.context[rows], self.committed[rows])
        self.committed[rows] = np.asarray(accepted) + 1


KAPPAS = (1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 3.0, 3.5, 4.0, 5.0)


@register_baseline("bayes", help="simspec's Bayes rule: verifies the nodes whose predicted acceptance pays for "
                   "their verification on the profile's curves, drafts on while the next levels are expected to pay",
                   grid=KAPPAS, timing_value=2.0, sized=False)
def bayes(ctx: RuleContext, kappa: float) -> BayesTree:
    return BayesTree(ctx.tree_predictor(), ctx.cost, kappa, ctx.width, ctx.depth_max)
