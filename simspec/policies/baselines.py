"""Depth rules from the literature as batch policies. The window rules of seed 003 (analytic γ,
FSM, Q-learning) and GammaTune were stated for draft *chains*; here they set the depth D of the
beam tree (γ = D - 1 draft steps) at a fixed width and size, as LTD compares against them."""

from __future__ import annotations

import numpy as np

from simspec.policies.base import BatchPolicy, Costs, row_streams, tree_capacities


def _logsumexp(x: np.ndarray) -> np.ndarray:
    top = np.max(x, axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    return (top + np.log(np.sum(np.exp(x - top), axis=-1, keepdims=True)))[..., 0]


class DepthBudget(BatchPolicy):
    """Shared shape of the depth rules: plan (max_depth, size), stop early by ``keep_drafting_batch``."""

    def __init__(self, width: int, max_depth: int, size: int) -> None:
        self.width, self.max_depth, self.size = width, max_depth, size

    def plan_batch(self, rows, context):
        return np.full(len(rows), self.max_depth), np.full(len(rows), self.size)


class DDD(DepthBudget):
    """Dynamic depth decoding: keep drafting while the beam's candidates still hold at least
    ``threshold`` of the draft's probability mass (logsumexp of their cumulative log-probs)."""

    def __init__(self, threshold: float, width: int = 10, max_depth: int = 12, size: int = 60) -> None:
        super().__init__(width, max_depth, size)
        self.threshold = threshold
        self.name = f"ddd(t={threshold:g})"

    def keep_drafting_batch(self, rows, depth, frontier, planned):
        return (_logsumexp(frontier) >= np.log(self.threshold)) & (depth < planned)


class SVIP(DepthBudget):
    """SVIP-style stop: keep drafting while the entropy of the newest level's candidate
    distribution (renormalised over the beam) stays under ``max_entropy`` nats: a confident
    draft goes deeper, an uncertain one stops."""

    def __init__(self, max_entropy: float, width: int = 10, max_depth: int = 12, size: int = 60) -> None:
        super().__init__(width, max_depth, size)
        self.max_entropy = max_entropy
        self.name = f"svip(h={max_entropy:g})"

    def keep_drafting_batch(self, rows, depth, frontier, planned):
        logp = frontier - _logsumexp(frontier)[:, None]
        logp = np.where(np.isfinite(logp), logp, 0.0)  # padding slots: p = 0, no entropy
        p = np.where(np.isfinite(frontier), np.exp(logp), 0.0)
        entropy = -np.sum(p * logp, axis=1)
        return (entropy <= self.max_entropy) & (depth < planned)


class GammaTune(DepthBudget):
    """Acceptance-driven window: an exponential average of accepted lengths sets the next
    depth one step past what was being accepted (deeper while acceptance grows)."""

    def __init__(self, alpha: float = 0.5, width: int = 10, max_depth: int = 12, size: int = 60,
                 start_depth: int = 4) -> None:
        super().__init__(width, max_depth, size)
        self.alpha, self.start_depth = alpha, start_depth
        self.name = f"gammatune(a={alpha:g})"

    def reset_batch(self, n):
        self.average = np.full(n, self.start_depth - 2.0)

    def plan_batch(self, rows, context):
        depth = np.clip(np.rint(self.average[rows]) + 2, 2, self.max_depth).astype(np.int64)
        return depth, np.full(len(rows), self.size)

    def observe_batch(self, rows, depth, size, accepted):
        self.average[rows] = (1 - self.alpha) * self.average[rows] + self.alpha * accepted


class FSM(DepthBudget):
    """A saturating counter on depth: one deeper after a cycle that accepted everything it
    drafted, one shallower otherwise. ``patience`` > 1 is the cached variant: it moves only
    after that many agreeing cycles in a row."""

    def __init__(self, width: int = 10, max_depth: int = 12, size: int = 60, start_depth: int = 4,
                 patience: int = 1) -> None:
        super().__init__(width, max_depth, size)
        self.start_depth, self.patience = start_depth, patience
        self.name = "fsm" if patience == 1 else f"cache-fsm(k={patience})"

    def reset_batch(self, n):
        self.depth = np.full(n, self.start_depth, dtype=np.int64)
        self.streak = np.zeros(n, dtype=np.int64)  # >0: full acceptances in a row; <0: misses

    def plan_batch(self, rows, context):
        return self.depth[rows].copy(), np.full(len(rows), self.size)

    def observe_batch(self, rows, depth, size, accepted):
        full = accepted >= depth - 1
        streak = self.streak[rows]
        streak = np.where(full, np.maximum(streak, 0) + 1, np.minimum(streak, 0) - 1)
        move = np.where(streak >= self.patience, 1, np.where(streak <= -self.patience, -1, 0))
        self.depth[rows] = np.clip(self.depth[rows] + move, 2, self.max_depth)
        self.streak[rows] = np.where(move != 0, 0, streak)


class AnalyticWindow(DepthBudget):
    """Seed 003's analytic window: with β the per-step acceptance rate over the last ``history``
    cycles (capped at 0.98), pick γ = D - 1 maximising expected tokens per second,
    (1 - β^(γ+1)) / ((1 - β) (γ a + b(γ))), with a the draft step and b(γ) the verification
    of that tree from the profile's cost model."""

    def __init__(self, cost: Costs, context: int = 256, history: int = 8, width: int = 10,
                 max_depth: int = 12, size: int = 60) -> None:
        super().__init__(width, max_depth, size)
        self.history = history
        self.gamma = np.arange(1, max_depth)
        self.step_s = float(cost.draft(width, context))
        self.verify_s = cost.verify(np.minimum(size, tree_capacities(self.gamma + 1, width)), context)
        self.name = f"analytic(h={history})"

    def reset_batch(self, n):
        self.accepted = np.zeros((n, self.history))
        self.trials = np.zeros((n, self.history))
        self.slot = np.zeros(n, dtype=np.int64)

    def plan_batch(self, rows, context):
        trials = self.trials[rows].sum(1)
        beta = np.where(trials > 0, self.accepted[rows].sum(1) / np.maximum(trials, 1), 0.6)
        beta = np.clip(beta, 1e-3, 0.98)[:, None]
        g = self.gamma[None, :]
        rate = (1 - beta ** (g + 1)) / ((1 - beta) * (g * self.step_s + self.verify_s[None, :]))
        return self.gamma[np.argmax(rate, axis=1)] + 1, np.full(len(rows), self.size)

    def observe_batch(self, rows, depth, size, accepted):
        # Each drafted level is a trial until the first rejection.
        slot = self.slot[rows] % self.history
        self.accepted[rows, slot] = accepted
        self.trials[rows, slot] = np.minimum(accepted + 1, depth - 1)
        self.slot[rows] += 1


class QLearning(DepthBudget):
    """Online tabular Q-learning of the depth: state = last accepted length, action = depth,
    reward = tokens per second of the cycle (from the cost model), ε-greedy, per sequence."""

    def __init__(self, cost: Costs, context: int = 256, epsilon: float = 0.1, lr: float = 0.3,
                 width: int = 10, max_depth: int = 12, size: int = 60, seed: int = 0) -> None:
        super().__init__(width, max_depth, size)
        self.epsilon, self.lr, self.seed = epsilon, lr, seed
        depth = np.arange(2, max_depth + 1)
        self.cycle_s = cost.cycle(depth, width, np.minimum(size, tree_capacities(depth, width)), context, 1)
        self.name = f"qlearn(eps={epsilon:g})"

    def reset_batch(self, n):
        self.q = np.zeros((n, self.max_depth, self.max_depth - 1))  # [row, last accepted, depth - 2]
        self.state = np.zeros(n, dtype=np.int64)
        self.streams = row_streams(self, n, self.seed, 2)

    def plan_batch(self, rows, context):
        greedy = np.argmax(self.q[rows, self.state[rows]], axis=1)
        u = self.streams.next(rows)  # whether to explore, and where to
        action = np.where(u[:, 0] < self.epsilon, (u[:, 1] * (self.max_depth - 1)).astype(np.int64), greedy)
        return action + 2, np.full(len(rows), self.size)

    def observe_batch(self, rows, depth, size, accepted):
        action = depth - 2
        reward = (accepted + 1) / self.cycle_s[action]
        q = self.q[rows, self.state[rows], action]
        self.q[rows, self.state[rows], action] = q + self.lr * (reward - q)
        self.state[rows] = np.minimum(accepted, self.max_depth - 1)


class TokenCacheFSM(FSM):
    """Seed 003's cache-enabled FSM. A token cache holds the prompt and every token committed
    since; after each cycle the window γ = D - 1 moves by the paper's rules: +1 when an accepted
    draft token was already in the cache, +1 more when every drafted token was accepted, -1 when
    no accepted token was in the cache (so a full acceptance of tokens new to the cache holds γ).
    Repetition of the context is its signal that drafting is easy."""

    reads_cache = True

    def __init__(self, width: int = 10, max_depth: int = 12, size: int = 60, start_depth: int = 4) -> None:
        super().__init__(width, max_depth, size, start_depth)
        self.name = "cachefsm-token"

    def observe_batch(self, rows, depth, size, accepted, hits=None):
        if hits is None:
            raise ValueError("the cache-enabled FSM needs the cache hits of each cycle (reads_cache)")
        hit = np.asarray(hits) > 0
        move = np.where(hit, 1, -1) + (accepted >= depth - 1)
        self.depth[rows] = np.clip(self.depth[rows] + move, 2, self.max_depth)


class PaperQLearning(DepthBudget):
    """Seed 003's Q-learning agent, an FSM whose moves are learned online: the state is the
    current window and how the last cycle ended (nothing accepted, some, all), the actions move
    the window by -1, 0 or +1, the reward is the cycle's speedup over plain decoding (tokens per
    second from the cost model, divided by plain decoding's), and the table is updated by
    one-step Q-learning (discount ``discount``), ε-greedy, one table per sequence. The table
    starts optimistic (the discounted return of the best reward any cycle can earn, forever), so
    that each move is tried before it is judged: from zeros, the first move tried keeps a
    positive value and greedy choice never leaves it."""

    def __init__(self, cost: Costs, context: int = 256, epsilon: float = 0.1, lr: float = 0.3,
                 discount: float = 0.9, width: int = 10, max_depth: int = 12, size: int = 60, start_depth: int = 4,
                 seed: int = 0) -> None:
        super().__init__(width, max_depth, size)
        self.epsilon, self.lr, self.discount, self.start_depth, self.seed = epsilon, lr, discount, start_depth, seed
        depth = np.arange(2, max_depth + 1)
        cycle_s = cost.cycle(depth, width, np.minimum(size, tree_capacities(depth, width)), context, 1)
        self.cycle_steps = cycle_s / float(cost.verify(1, context))  # a cycle, in plain decoding steps
        self.name = f"qlearn-paper(eps={epsilon:g})"

    def reset_batch(self, n):
        best = float(np.max(np.arange(2, self.max_depth + 1) / self.cycle_steps))
        # [row, depth - 2, last outcome, move + 1]
        self.q = np.full((n, self.max_depth - 1, 3, 3), best / (1 - self.discount))
        self.depth = np.full(n, self.start_depth, dtype=np.int64)
        self.outcome = np.ones(n, dtype=np.int64)
        self.move = np.ones(n, dtype=np.int64)
        self.state_depth = self.depth.copy()
        self.streams = row_streams(self, n, self.seed, 2)

    def plan_batch(self, rows, context):
        here = self.depth[rows]
        greedy = np.argmax(self.q[rows, here - 2, self.outcome[rows]], axis=1)
        u = self.streams.next(rows)  # whether to explore, and which move
        move = np.where(u[:, 0] < self.epsilon, (u[:, 1] * 3).astype(np.int64), greedy)
        self.state_depth[rows], self.move[rows] = here, move
        self.depth[rows] = np.clip(here + move - 1, 2, self.max_depth)
        return self.depth[rows].copy(), np.full(len(rows), self.size)

    def observe_batch(self, rows, depth, size, accepted):
        outcome = np.where(accepted == 0, 0, np.where(accepted >= depth - 1, 2, 1))
        reward = (accepted + 1) / self.cycle_steps[np.clip(depth, 2, self.max_depth) - 2]
        s_depth, s_outcome, move = self.state_depth[rows] - 2, self.outcome[rows], self.move[rows]
        future = self.q[rows, self.depth[rows] - 2, outcome].max(axis=1)
        q = self.q[rows, s_depth, s_outcome, move]
        self.q[rows, s_depth, s_outcome, move] = q + self.lr * (reward + self.discount * future - q)
        self.outcome[rows] = outcome
