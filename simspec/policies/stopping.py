"""Classifier stopping rules: a small network reads the draft's newest level and predicts whether
the target accepts the path one level deeper.

- SpecDec++ (Huang et al., 2024) stops when the predicted probability that *some* drafted token
  is rejected, 1 - prod_i p_i, exceeds a threshold h (its MDP's optimal policy is such a threshold).
- Disco (Mamou et al., 2024) stops as soon as the newest token's own p_i falls under a threshold.

Both read the newest level's scores and the previous level's best, so one predictor (trained on
train-split traces: ``simspec.sim.labels``) decides alike in replay and the engine. The papers'
classifiers read the drafter's hidden states; on a tree the beam's scores carry the same signal.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simspec.policies.baselines import DepthBudget, _logsumexp

N_FEATURES = 6
_FLOOR = -20.0  # log-prob floor: padded (-inf) candidates and empty levels


def step_features(frontier: np.ndarray, depth: np.ndarray, previous_top: np.ndarray, depth_max: int) -> np.ndarray:
    """[rows, N_FEATURES] after a draft step reaching ``depth`` levels: the best score and its gain over
    the previous level's best, the runner-up's margin, the level's log-mass over the previous best,
    the level's renormalised entropy, and the depth."""
    frontier = np.maximum(np.asarray(frontier, np.float64), _FLOOR)
    top = frontier[:, 0]
    previous_top = np.maximum(np.asarray(previous_top, np.float64), _FLOOR)
    logp = frontier - _logsumexp(frontier)[:, None]
    entropy = -np.sum(np.exp(logp) * logp, axis=1)
    return np.stack([np.maximum(top, _FLOOR), top - previous_top, frontier[:, 1] - top,
                     _logsumexp(frontier) - previous_top, entropy, (np.asarray(depth) - 1) / depth_max], axis=1)


@dataclass
class AcceptancePredictor:
    """features -> P(the path one level deeper is accepted): one tanh hidden layer, a sigmoid; ``fit``:
    weighted cross-entropy (soft labels at T > 0) with Adam, full batch, seeded."""

    mean: np.ndarray
    scale: np.ndarray
    w1: np.ndarray
    b1: np.ndarray
    w2: np.ndarray
    b2: float

    @classmethod
    def random(cls, hidden: int = 16, seed: int = 0, features: int = N_FEATURES) -> AcceptancePredictor:
        rng = np.random.default_rng(seed)
        return cls(np.zeros(features), np.ones(features), rng.normal(0, 1 / np.sqrt(features), (features, hidden)),
                   np.zeros(hidden), rng.normal(0, 1 / np.sqrt(hidden), hidden), 0.0)

    def predict(self, features: np.ndarray) -> np.ndarray:
        x = ((features - self.mean) / self.scale).astype(np.float32)  # float32 as in ``fit``: tanh's SIMD path
        h = np.tanh(x @ self.w1.astype(np.float32) + self.b1.astype(np.float32))
        return 1.0 / (1.0 + np.exp(-(h @ self.w2.astype(np.float32) + np.float32(self.b2)).astype(np.float64)))

    @classmethod
    def fit(cls, features: np.ndarray, labels: np.ndarray, weights: np.ndarray, hidden: int = 16,
            steps: int = 400, lr: float = 0.02, seed: int = 0) -> AcceptancePredictor:
        model = cls.random(hidden, seed, features.shape[1])
        model.mean, model.scale = features.mean(0), features.std(0) + 1e-6
        # The passes over every example run in float32 (numpy's float64 tanh has no SIMD path: it
        # took most of a fit), with a column of ones for the hidden bias (one product gives both
        # gradients); the weights and Adam's moments stay float64.
        x = np.hstack([(features - model.mean) / model.scale, np.ones((len(features), 1))]).astype(np.float32)
        w, labels = (weights / weights.sum()).astype(np.float32), labels.astype(np.float32)
        params = [np.vstack([model.w1, model.b1]), model.w2, np.array([model.b2])]
        moments = [(np.zeros_like(p), np.zeros_like(p)) for p in params]
        for t in range(1, steps + 1):
            w1, w2, b2 = (p.astype(np.float32) for p in params)
            h = np.tanh(x @ w1)
            p = 1.0 / (1.0 + np.exp(-(h @ w2 + b2[0])))
            d_logit = w * (p - labels)  # d(weighted cross-entropy)/d(logit)
            d_h = 1 - h * h
            d_h *= w2
            d_h *= d_logit[:, None]
            grads = [x.T @ d_h, h.T @ d_logit, np.array([d_logit.sum()])]
            for param, grad, (m, v) in zip(params, grads, moments):
                m[...] = m * 0.9 + 0.1 * grad
                v[...] = v * 0.999 + 0.001 * grad * grad
                param -= lr * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
        model.w1, model.b1, model.w2, model.b2 = params[0][:-1], params[0][-1], params[1], float(params[2][0])
        return model


class _ClassifierStop(DepthBudget):
    """Shared state: the previous level's best score and the running product of predictions."""

    label = "{:g}"

    def __init__(self, predictor: AcceptancePredictor, threshold: float, width: int = 10, max_depth: int = 12,
                 size: int = 60) -> None:
        super().__init__(width, max_depth, size)
        self.predictor, self.threshold = predictor, threshold
        self.name = self.label.format(threshold)

    def reset_batch(self, n):
        self.previous_top = np.zeros(n)
        self.survive = np.ones(n)

    def plan_batch(self, rows, context):
        self.previous_top[rows] = 0.0  # the root's score
        self.survive[rows] = 1.0
        return super().plan_batch(rows, context)

    def _accept_probability(self, rows, depth, frontier) -> np.ndarray:
        frontier = np.asarray(frontier, np.float32)
        p = self.predictor.predict(step_features(frontier, depth, self.previous_top[rows], self.max_depth))
        self.previous_top[rows] = frontier[:, 0]
        return p


class SpecDecPP(_ClassifierStop):
    """SpecDec++: continue while the predicted probability that every drafted token is accepted,
    prod_i p_i, stays at least 1 - ``threshold``."""

    label = "specdec++(h={:g})"

    def keep_drafting_batch(self, rows, depth, frontier, planned):
        self.survive[rows] *= self._accept_probability(rows, depth, frontier)
        return (self.survive[rows] >= 1 - self.threshold) & (depth < planned)


class DiscoStop(_ClassifierStop):
    """Disco: continue while the newest token's predicted acceptance probability is at least
    ``threshold``."""

    label = "disco(t={:g})"

    def keep_drafting_batch(self, rows, depth, frontier, planned):
        return (self._accept_probability(rows, depth, frontier) >= self.threshold) & (depth < planned)
