"""The information bound on greedy traces (numpy only): the Bayes decision of
``simspec.policies.rules.bayes`` granted the whole drafted tree before it decides.

Every cycle, the bound reads every level's node scores at once (as if drafted to D_max for
free), turns them into P(node on the greedy path) with a node classifier, and picks the (D, V)
maximising ``expected tokens - lambda * cycle seconds``, paying only for the D levels it keeps. A
policy that sees the scores level by level observes less. What the bound misses of the oracle is
what node scores do not tell; its remaining optimism: C2T's four node features, one classifier
class, and lambda picked on the evaluated prompts.

``history_bound`` adds the prompt's recent acceptance (moving averages of its cycles' accepted
tokens and of whole-path cycles, under the bound's own decisions) and the context length as three
more features of every node, its classifier fitted on the cycles the node-score bound visits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simspec.errors import SimspecError
from simspec.policies.base import tree_capacities
from simspec.policies.rules.bayes import KAPPAS, node_probabilities
from simspec.policies.stopping import AcceptancePredictor
from simspec.sim.costmodel import CostModel
from simspec.sim.labels import WHOLE_TREE, node_examples, path_by_rank
from simspec.sim.replay import greedy_seconds, positions_limit
from simspec.sim.traces import TraceSet, accepted_at


@dataclass
class BoundResult:
    speedup: np.ndarray  # [prompts], prefill included on both sides, as replay reports it
    kappa: float  # the rate lambda = kappa / verify(1, L) that scored best
    depths: np.ndarray  # histogram of the depths chosen, index = D


# the history a cycle is decided with: moving averages of the prompt's accepted tokens and of
# whether a cycle took its whole drafted path (starting at a neutral prior), and log context
HISTORY_FEATURES, HISTORY_DECAY, HISTORY_PRIOR = 3, 0.7, (1.0, 0.5)


def full_tree_bayes(traces: TraceSet, cost: CostModel, probabilities, kappa: float, visits: list | None = None,
                    max_new_tokens: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(speedup per prompt, chosen-depth histogram) of the full-tree Bayes decision at ``kappa``;
    ``probabilities(at, history) -> [rows, levels * W**2]`` is P(node on path) at trace positions
    ``at``, ``history`` the rows' ``[rows, HISTORY_FEATURES]``; ``visits`` collects (at, history)."""
    width, dmax = traces.width, traces.depth_max
    limit = positions_limit(traces, max_new_tokens)
    start, n = traces.prompt_offsets[:-1], traces.n_prompts
    position, previous, seconds = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n)
    level_of = np.repeat(np.arange(dmax - 1), width * width)
    depths = np.zeros(dmax + 1, np.int64)
    accepted_ema, whole_ema = np.full(n, HISTORY_PRIOR[0]), np.full(n, HISTORY_PRIOR[1])
    active = position < limit
    while active.any():
        rows = np.flatnonzero(active)
        at = start[rows] + position[rows]
        context, committed = traces.context_length[at], previous[rows] + 1
        history = np.column_stack([accepted_ema[rows], whole_ema[rows], np.log(np.maximum(context, 1))])
        if visits is not None:
            visits.append((at, history))
        scores, p = traces.level_scores[at].astype(np.float32), probabilities(at, history)
        rate, best = kappa / cost.verify(np.ones(len(rows)), context), np.full(len(rows), -np.inf)
        depth, size = np.ones(len(rows), np.int64), np.ones(len(rows), np.int64)
        ranked = _RankedNodes(p, scores, level_of)
        for d in range(1, dmax + 1):
            cap = int(min(tree_capacities(np.array([d]), width)[0], traces.nodes))
            gain = ranked.expected_tokens(d - 1)[:, :cap]
            # operands left unbroadcast: cycle gathers each term at its own operands' shape
            cycle = cost.cycle(np.array([[d]]), width, np.arange(1, gain.shape[1] + 1)[None, :], context[:, None],
                               committed[:, None])
            objective = gain - rate[:, None] * cycle
            pick = objective.argmax(axis=1)
            value = objective[np.arange(len(rows)), pick]
            better = value > best
            best[better], depth[better], size[better] = value[better], d, pick[better] + 1
        accepted = accepted_at(traces.path_rank, at, depth, size)
        seconds[rows] += cost.cycle(depth, width, size, context, committed)
        depths += np.bincount(depth, minlength=dmax + 1)
        position[rows] += accepted + 1
        previous[rows] = accepted
        accepted_ema[rows] = HISTORY_DECAY * accepted_ema[rows] + (1 - HISTORY_DECAY) * accepted
        whole = (depth > 1) & (accepted == depth - 1)
        whole_ema[rows] = HISTORY_DECAY * whole_ema[rows] + (1 - HISTORY_DECAY) * whole
        active = position < limit
    prefill = cost.prefill(traces.prompt_lengths)
    return (greedy_seconds(traces, cost, limit) + prefill) / (seconds + prefill), depths


class _RankedNodes:
    """A cycle's nodes ranked once by score (best first, ties to the shallower, as the engines take
    them) for ``expected_tokens`` at every depth: the nodes a depth keeps stand in the same order
    in the whole tree's ranking, so each depth moves them to the front with a stable sort of a
    boolean (radix, linear) instead of sorting the scores again."""

    def __init__(self, p: np.ndarray, scores: np.ndarray, level_of: np.ndarray) -> None:
        flat = scores.reshape(len(scores), -1)
        finite = np.isfinite(flat)
        order = np.argsort(np.where(finite, -flat, np.inf), axis=1, kind="stable")
        self.p = np.take_along_axis(np.where(finite, p, 0.0), order, axis=1)
        self.level = np.where(np.take_along_axis(finite, order, axis=1), level_of[order], len(level_of))

    def expected_tokens(self, levels: int) -> np.ndarray:
        """``policies.rules.bayes.expected_tokens`` over the first ``levels`` levels, the same sums."""
        kept = self.level < levels
        front = np.argsort(~kept, axis=1, kind="stable")
        ranked = np.take_along_axis(np.where(kept, self.p, 0.0), front, axis=1)
        n = int(kept.sum(axis=1).max(initial=0))
        return 1.0 + np.concatenate([np.zeros((len(kept), 1)), np.cumsum(ranked[:, :n], axis=1)], axis=1)


def information_bound(traces: TraceSet, cost: CostModel, predictor, kappas: tuple[float, ...] = KAPPAS,
                      max_new_tokens: int | None = None) -> BoundResult:
    """The full-tree Bayes decision with ``predictor``'s node probabilities, at the best ``kappas`` value."""
    return _best_kappa(traces, cost, _scored(traces, predictor), kappas, max_new_tokens)


def _scored(traces: TraceSet, predictor, history: bool = False):
    """``probabilities(at, history)`` of ``full_tree_bayes`` from ``predictor`` (reading the history or not)."""
    def probabilities(at, extra=None):
        return node_probabilities(predictor, traces.level_scores[at].astype(np.float32), traces.depth_max,
                                  extra=extra if history else None)
    return probabilities if history else _once_per_position(probabilities, traces)


MEMO_BYTES = 1 << 30  # the node-score bound's table of probabilities, at most (else each visit computes its own)


def _once_per_position(probabilities, traces: TraceSet):
    """``probabilities`` kept per trace position: node scores alone fix them, and the runs at every
    kappa visit the same positions (on the shipped held-out traces 40,273 visits of 6,917 positions)."""
    positions, *tree = traces.level_scores.shape
    shape = (positions, int(np.prod(tree)))
    if shape[0] * shape[1] * 8 > MEMO_BYTES:
        return probabilities
    table, known = np.empty(shape), np.zeros(shape[0], bool)  # pages are taken as positions are visited

    def memo(at, extra=None):
        new = at[~known[at]]
        if len(new):
            table[new], known[new] = probabilities(new), True
        return table[at]
    return memo


def _greedy(traces: TraceSet) -> None:
    if traces.sampled:
        raise SimspecError("the information bound reads the target's greedy path: it needs greedy traces "
                           "(temperature 0)")


def _best_kappa(traces, cost, probabilities, kappas, max_new_tokens: int | None = None) -> BoundResult:
    _greedy(traces)
    runs = {k: full_tree_bayes(traces, cost, probabilities, k, max_new_tokens=max_new_tokens) for k in kappas}
    kappa = max(runs, key=lambda k: float(np.median(runs[k][0])))
    return BoundResult(runs[kappa][0], kappa, runs[kappa][1])


def history_predictor(traces: TraceSet, cost: CostModel, predictor, kappa: float, positions: int = 3000,
                      seed: int = 0) -> AcceptancePredictor:
    """A node classifier over C2T's features plus the cycle's history, fitted on up to ``positions``
    cycles that the node-score bound (``predictor`` at ``kappa``) starts on ``traces``, the best
    ``WHOLE_TREE`` nodes of each labelled by the greedy path."""
    _greedy(traces)
    visits: list = []
    full_tree_bayes(traces, cost, _scored(traces, predictor), kappa, visits)
    at, history = np.concatenate([v[0] for v in visits]), np.concatenate([v[1] for v in visits])
    rng = np.random.default_rng(seed)  # one stream: the cycles drawn, then the examples kept of theirs
    chosen = np.sort(rng.choice(len(at), min(positions, len(at)), replace=False))
    examples = node_examples(traces, top=WHOLE_TREE, seed=rng, rows=at[chosen], extra=history[chosen])
    return AcceptancePredictor.fit(*examples, seed=seed)


def history_bound(traces: TraceSet, cost: CostModel, predictor, kappas: tuple[float, ...] = KAPPAS,
                  max_new_tokens: int | None = None) -> BoundResult:
    """``information_bound`` with ``history_predictor``'s classifier, each cycle's history its own."""
    return _best_kappa(traces, cost, _scored(traces, predictor, True), kappas, max_new_tokens)


def perfect_probabilities(traces: TraceSet):
    """P(node on path) known exactly: the bound then knows what the oracle knows (a check of the machinery)."""

    def probabilities(at, history=None):
        flat = traces.level_scores[at].astype(np.float32).reshape(len(at), -1)
        order = np.argsort(np.where(np.isfinite(flat), -flat, np.inf), axis=1, kind="stable")
        p = np.zeros(flat.shape)
        np.put_along_axis(p, order, path_by_rank(traces, at, flat.shape[1]), axis=1)  # ranks back to nodes
        return p

    return probabilities
