"""Speculative *sampling*: verification at temperature > 0 that keeps the output distribution
exactly the target's.

Feature heads draft top-k children, point masses q = 1, verified by EAGLE-2/3's walk
(``TreeVerifier``): at the last accepted node, with the target's p there, try its children in
the drafter's rank, accepting x with probability p(x); a rejection sets p(x) = 0 and
renormalises; an acceptance descends. With every child rejected, or at a leaf, the bonus token
is drawn from the residual p. A draft LM's sampled chain takes the standard rule
(``ChainVerifier``): accept x with probability min(1, p(x)/q(x)), else draw from norm(max(0, p - q)).

One seeded ``numpy.random.Generator`` per generation draws everything; distributions are float64
on the host (float32 renormalisation after several rejections drifts).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import torch

from simspec.errors import SimspecError


@dataclass(frozen=True)
class Sampling:
    """``temperature`` 0: greedy decoding (argmax); above 0, sampling from softmax(logits / T) cut
    to the nucleus of mass ``top_p``. ``seed``: a run's n-th prompt draws with seed + n."""

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not np.isfinite(self.temperature) or self.temperature < 0:
            raise SimspecError(f"--temperature must be >= 0 (0: greedy decoding), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise SimspecError(f"--top-p must be in (0, 1], got {self.top_p}")
        if self.temperature == 0 and self.top_p != 1:
            raise SimspecError("--top-p needs --temperature > 0 (greedy decoding takes the argmax)")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def describe(self) -> dict:
        return asdict(self)


GREEDY = Sampling()


def distribution(logits: torch.Tensor, sampling: Sampling) -> np.ndarray:
    """Rows of softmax(logits / T), each cut to its top-p nucleus and renormalised (float64)."""
    z = logits.detach().double().cpu() / sampling.temperature
    p = torch.softmax(z, dim=-1).numpy()
    if sampling.top_p < 1:
        p = np.atleast_2d(p)
        order = np.argsort(-p, axis=-1, kind="stable")
        sorted_p = np.take_along_axis(p, order, -1)
        # keep the smallest prefix whose mass reaches top_p (the token that crosses it included)
        before = np.cumsum(sorted_p, -1) - sorted_p
        keep = np.zeros_like(p, dtype=bool)
        np.put_along_axis(keep, order, before < sampling.top_p, -1)
        p = np.where(keep, p, 0.0)
        p /= p.sum(-1, keepdims=True)
        p = p.reshape(logits.shape)
    return p


def row_distributions(logits: torch.Tensor, sampling: Sampling) -> Callable[[int], np.ndarray]:
    """The target's distribution after each verified row, computed when a walk asks for it."""
    return functools.cache(lambda row: distribution(logits[row], sampling))


def draw(weights: np.ndarray, rng: np.random.Generator) -> int:
    """One index drawn with probability proportional to ``weights`` (never one of zero weight)."""
    cdf = np.cumsum(weights)
    return int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"))


class TreeVerifier:
    """EAGLE's walk over deterministic drafts (children are point masses)."""

    def accept(self, tokens: np.ndarray, parent_rows: np.ndarray, probs_of: Callable[[int], np.ndarray],
               rng: np.random.Generator) -> tuple[np.ndarray, int]:
        """``tokens[r]``: the verified rows' tokens (row 0 the root); ``parent_rows[r - 1]``: row
        r's parent; ``probs_of(r)``: the target's distribution after row r. Returns the accepted
        rows (root first, in path order) and the token emitted after the last of them."""
        children: dict[int, list[int]] = {}
        for row, parent in enumerate(parent_rows.tolist(), start=1):  # ascending: the drafter's rank
            children.setdefault(parent, []).append(row)
        path, row = [0], 0
        p = probs_of(0).copy()
        while True:
            for child in children.get(row, ()):
                x = int(tokens[child])
                if rng.random() < self.acceptance(p, x):
                    path.append(child)
                    row, p = child, probs_of(child).copy()
                    break
                p = self.after_rejection(p, x)
            else:
                return np.array(path), draw(p, rng)

    @staticmethod
    def acceptance(p: np.ndarray, x: int) -> float:
        return float(p[x])

    @staticmethod
    def after_rejection(p: np.ndarray, x: int) -> np.ndarray:
        """The residual after rejecting the point mass at x: p without x, renormalised."""
        p[x] = 0.0
        total = p.sum()
        return p / total if total > 0 else p


class ChainVerifier:
    """The standard speculative-sampling rule for drafts sampled from a draft model's q."""

    def accept(self, tokens: np.ndarray, q_rows: list[np.ndarray], probs_of: Callable[[int], np.ndarray],
               rng: np.random.Generator) -> tuple[np.ndarray, int]:
        """``tokens``: the chain's rows (root first); ``q_rows[i]``: the distribution the draft at
        row i + 1 was sampled from (over the target's vocabulary)."""
        for row in range(1, len(tokens)):
            p, q, x = probs_of(row - 1), q_rows[row - 1], int(tokens[row])
            if rng.random() * q[x] >= p[x]:  # accept with probability min(1, p(x) / q(x))
                return np.arange(row), draw(self.residual(p, q), rng)
        return np.arange(len(tokens)), draw(probs_of(len(tokens) - 1), rng)

    @staticmethod
    def residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
        return np.maximum(p - q, 0.0)


def pit_values(probs: np.ndarray, tokens: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Randomised PIT: u = F(x-) + U p(x), U ~ Uniform(0, 1), i.i.d. Uniform(0, 1) exactly when
    each x was drawn from its p. F runs from the likeliest token down, so that a verifier's typical
    faults (mass on the likely, drafted tokens) move u toward 0 or 1 instead of scattering."""
    rows = np.arange(len(tokens))
    chosen = probs[rows, tokens]
    # mass of the tokens ranked before x: likelier ones, and equally likely ones of lower id
    ahead = (probs > chosen[:, None]) | ((probs == chosen[:, None]) & (np.arange(probs.shape[1]) < tokens[:, None]))
    below = np.where(ahead, probs, 0.0).sum(-1)
    return below + rng.random(len(tokens)) * chosen
