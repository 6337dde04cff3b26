"""The one policy interface, shared unchanged by the real engine and the simulator.

A policy is written once over arrays of sequences (``BatchPolicy``): the simulator steps
thousands per call, the real engine its busy rows. A cycle offers the seed papers' three
decision points: ``plan_batch`` before drafting (depth budget and size: Re-SpS),
``keep_drafting_batch`` after every draft step (CONTINUE or STOP: LTD's depth policy, RADAR,
DDD, SVIP) and ``choose_size_batch`` once the trees are built (nodes verified: LTD's size
policy; ``children_batch``, Re-SpS's top-k, prunes them); ``observe_batch`` then reports what the
target accepted (and, to token-cache rules, how many accepted drafts were already in the cache).

Conventions (LTD's counting): depth D counts tree levels *including the root* (D - 1 draft
steps, at most ``tree_capacity(D, W)`` nodes, at most D tokens per cycle); size V counts
verified nodes *including the root*; D = 1 or V = 1 is plain decoding. Scores are cumulative
draft log-probabilities from the root (root = 0).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from simspec.errors import SimspecError
from simspec.policies.shape import TreeShape


def tree_capacity(depth: int, width: int) -> int:
    """Nodes (root included) of a fully drafted tree of ``depth`` levels and beam ``width``."""
    return 1 if depth <= 1 else 1 + width + (depth - 2) * width * width


def tree_capacities(depth: np.ndarray, width: int) -> np.ndarray:
    """``tree_capacity`` over arrays of depths (the simulator's and the window rules' form)."""
    depth = np.asarray(depth)
    return np.where(depth <= 1, 1, 1 + width + np.maximum(depth - 2, 0) * width * width)


@dataclass(frozen=True)
class DraftPlan:
    """A cycle's tree budget: at most ``depth`` levels, beam ``width``, ``size`` verified nodes;
    or, with ``shape``, that exact tree (Sequoia's), cut at ``depth`` levels."""

    depth: int
    width: int
    size: int
    shape: TreeShape | None = None

    def __post_init__(self) -> None:
        for name in ("depth", "width", "size"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise SimspecError(f"draft {name} must be an integer >= 1, got {value!r}")


class Costs(Protocol):
    """What a cost-aware policy reads of a latency model (``simspec.sim.costmodel.CostModel``
    satisfies it): seconds per draft step, per verification and per whole cycle."""

    def draft(self, nodes, context) -> np.ndarray: ...

    def verify(self, size, context) -> np.ndarray: ...

    def cycle(self, depth, width, size, context, committed) -> np.ndarray: ...


def frontier_scores(scores: np.ndarray, width: int) -> np.ndarray:
    """A draft step's new level laid out as the traces hold it: ``[W**2]``, sorted best first,
    rounded to float16, padded with -inf (level 1 has W nodes)."""
    out = np.full(width * width, -np.inf, dtype=np.float32)
    row = np.sort(scores)[::-1]
    out[: len(row)] = row.astype(np.float16)
    return out


def sorted_levels(scores: np.ndarray, width: int, levels: int) -> np.ndarray:
    """Node scores as traces hold them: ``[levels, W**2]``, each level as ``frontier_scores`` lays it out."""
    out = np.empty((levels, width * width), dtype=np.float32)
    start = 1
    for level in range(levels):
        count = width if level == 0 else width * width
        out[level] = frontier_scores(scores[start:start + count], width)
        start += count
    return out


def keep_best_children(parents: np.ndarray, selected: np.ndarray, children, levels: int) -> np.ndarray:
    """Which ``selected`` nodes stay when each keeps at most ``children`` (per row, or one number) of
    its selected children: ``parents[row, i]`` is node i's column (-1: the root), parents precede
    children and siblings come best first. A node stays when it ranks below k among its selected
    siblings and so does every ancestor up to ``levels`` deep: a set closed under ancestors, so the
    engine verifies it and replay reads its acceptance alike."""
    parents, selected = np.atleast_2d(parents), np.atleast_2d(selected)
    n, k = parents.shape
    columns = np.broadcast_to(np.arange(k), (n, k))
    key = np.where(selected, parents, k)  # group the selected by parent, in column order
    order = np.argsort(key, axis=1, kind="stable")
    grouped = np.take_along_axis(key, order, 1)
    starts = np.ones((n, k), dtype=bool)
    starts[:, 1:] = grouped[:, 1:] != grouped[:, :-1]
    rank = np.empty((n, k), dtype=np.int64)
    np.put_along_axis(rank, order, columns - np.maximum.accumulate(np.where(starts, columns, 0), axis=1), 1)
    keep = selected & (rank < np.reshape(children, (-1, 1)))
    up = np.maximum(parents, 0)
    for _ in range(levels):  # a node stays only below kept ancestors
        keep &= np.take_along_axis(keep, up, 1) | (parents < 0)
    return keep


class RowStreams:
    """Random numbers for a rule that explores, a stream per row: row r's k-th call of ``next``
    returns the k-th draws of the stream seeded by (``seed``, r's key). The engine decodes a queue
    per call and replay many queues (passes, draws) in one; keyed by the sequence's place in its
    queue, a sequence meets the same draws in both, so the replay predicts the run the engine makes
    (common random numbers), not the mean over exploration seeds, from which one run of a
    Q-learner can stand a fifth apart (docs/simulator.md#a-policys-own-random-numbers)."""

    def __init__(self, seed: int, keys: np.ndarray, draws: int) -> None:
        self.seed, self.draws = seed, draws
        self.unique, self.index = np.unique(np.asarray(keys, dtype=np.int64), return_inverse=True)
        self.count = np.zeros(len(self.index), dtype=np.int64)
        self.table = np.empty((len(self.unique), 0, draws))

    def next(self, rows: np.ndarray) -> np.ndarray:
        """[len(rows), draws] uniforms in [0, 1): each row's next draws."""
        at = self.count[rows]
        if len(at) and at.max() >= self.table.shape[1]:  # regrown whole: a stream's prefix stays as it was
            length = max(64, 2 * self.table.shape[1], int(at.max()) + 1)
            self.table = np.stack([np.random.default_rng([self.seed, int(k)]).random((length, self.draws))
                                   for k in self.unique])
        self.count[rows] += 1
        return self.table[self.index[rows], at]


def row_streams(policy: BatchPolicy, n: int, seed: int, draws: int) -> RowStreams:
    """``n`` new rows' ``RowStreams``, keyed as the driver set ``policy.row_streams`` for this reset
    (taken: a driver that sets none, such as the decision timer, gets each row its own index)."""
    keys, policy.row_streams = policy.row_streams if policy.row_streams is not None else np.arange(n), None
    if len(keys) != n:
        raise SimspecError(f"{len(keys)} row streams for {n} rows: set row_streams before reset_batch")
    return RowStreams(seed, keys, draws)


def overrides(policy: BatchPolicy, method: str) -> bool:
    """Whether ``policy`` decides ``method`` itself (the engine and replay skip asking otherwise)."""
    return getattr(type(policy), method) is not getattr(BatchPolicy, method)


class BatchPolicy(ABC):
    """Per-row state lives in arrays sized by ``reset_batch``, indexed by ``rows``. Observations are
    alike on both sides: frontier scores ``[rows, W**2]`` and tree scores ``[rows, depth - 1, W**2]``,
    sorted, -inf padded and rounded to float16 as traces store them, so a threshold decides alike."""

    name: str = "policy"
    # The decision time charged per cycle: a baseline's --baselines name (timed by calibrate),
    # "static" for any fixed tree, or "policy:<folder>" (its policy.json's time).
    family: str = "static"
    width: int = 10
    reads_cache: bool = False  # token-cache rules: ``observe_batch`` also gets ``hits``, accepted drafts cached
    # Sequences verified together in one forward, set by the driver before ``reset_batch`` (under
    # load before every cycle, with ``waiting``: requests arrived that have no row yet). Replay's
    # rows are independent sequences, not a batch.
    batch_size: int = 1
    waiting: int = 0
    # Each row's random stream (``RowStreams``), set by the driver before ``reset_batch``: the
    # sequence's index in its queue, which the engine and replay share. None: the row's own index.
    row_streams: np.ndarray | None = None
    shape: TreeShape | None = None  # Sequoia's one tree of fixed shape; None: (D, W, top-V) trees

    def reset_batch(self, n: int) -> None:  # noqa: B027 (optional hook)
        """``n`` new sequences start."""

    @abstractmethod
    def plan_batch(self, rows: np.ndarray, context: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(depth budget, size) per row."""

    def keep_drafting_batch(self, rows: np.ndarray, depth: np.ndarray, frontier: np.ndarray,
                            planned: np.ndarray) -> np.ndarray:
        """CONTINUE (True) or STOP per row, after a draft step that reached ``depth`` levels."""
        return depth < planned

    def choose_size_batch(self, rows: np.ndarray, depth: np.ndarray, tree_scores: np.ndarray,
                          planned: np.ndarray) -> np.ndarray:
        return planned

    def children_batch(self, rows: np.ndarray) -> np.ndarray | None:
        """Re-SpS's top-k: each verified node keeps at most this many of its best children, per row
        (``keep_best_children``); None keeps the top-V set whole."""
        return None

    def observe_batch(self, rows: np.ndarray, depth: np.ndarray, size: np.ndarray,  # noqa: B027 (optional hook)
                      accepted: np.ndarray) -> None:
        """What the target accepted, per row."""


def count_cache_hits(cache: set[int], tokens: list[int], accepted: int) -> int:
    """How many of a cycle's ``accepted`` drafts (the first of the committed ``tokens``) were already in
    ``cache``, adding each committed token to it in turn, as replay counts them (``TraceSet.cache_hits``)."""
    hits = 0
    for i, token in enumerate(tokens):
        hits += i < accepted and token in cache
        cache.add(token)
    return hits


def drafted_depths(policy: BatchPolicy, rows: np.ndarray, planned: np.ndarray,
                   frontier_of: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """The depths ``policy`` drafts to, asked after every draft step but the last as the engine asks;
    ``frontier_of(idx, depth)``: the newest level's scores of rows ``idx`` at ``depth`` levels."""
    depth = np.minimum(planned, 2)
    asking = planned > 2
    while asking.any():
        idx = np.flatnonzero(asking)
        go = np.asarray(policy.keep_drafting_batch(rows[idx], depth[idx], frontier_of(idx, depth[idx]), planned[idx]),
                        bool)
        depth[idx[go]] += 1
        asking[idx] = go & (depth[idx] < planned[idx])
    return depth


def eagle3_default() -> StaticPolicy:
    """EAGLE-3's shipped tree: depth 8, top-k 10, 60 verified tokens."""
    return StaticPolicy(depth=8, width=10, size=60, name="eagle3")


class StaticPolicy(BatchPolicy):
    """The same (D, W, V) every cycle. ``StaticPolicy(8, 10, 60)`` is EAGLE-3's default."""

    def __init__(self, depth: int, width: int, size: int, name: str | None = None) -> None:
        self._plan = DraftPlan(depth=depth, width=width, size=size)
        self.width = width
        self.name = name or f"static(D={depth},W={width},V={size})"

    def plan_batch(self, rows: np.ndarray, context: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.full(len(rows), self._plan.depth), np.full(len(rows), self._plan.size)
