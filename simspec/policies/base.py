"""The one policy interface, shared unchanged by the real engine and the simulator.

A policy is written once over arrays of sequences (``BatchPolicy``): the simulator steps
thousands of them per call, the real engine its busy rows (one at batch 1). A draft-and-verify
cycle offers it three decision points, the ones the seed papers use:

1. ``plan_batch``           before drafting: each row's depth budget and size — Re-SpS picks
                            (total tokens, depth, top-k) here and may hold it for N cycles.
2. ``keep_drafting_batch``  after every draft step: CONTINUE or STOP per row, seeing the newest
                            level's candidate scores and the depth so far — LTD's depth policy,
                            RADAR, DDD, SVIP.
3. ``choose_size_batch``    once the trees are built: how many nodes the target verifies per
                            row, seeing every node's score — LTD's size policy.

``observe_batch`` then reports what the target accepted, for adaptive baselines (GammaTune, the
analytic window, FSMs, Q-learning), and to rules that keep a token cache (seed 003's
cache-enabled FSM) how many accepted drafts were already in it (``count_cache_hits``).

Conventions (LTD's counting, used everywhere in simspec):
- depth D counts tree *levels including the root*; a depth-D tree needs D - 1 draft steps,
  holds at most ``tree_capacity(D, W) = 1 + W + (D - 2) * W**2`` nodes and can gain at most
  D tokens per cycle (D - 1 accepted drafts plus the target's bonus token). D = 1 is plain
  decoding.
- size V counts verified nodes *including the root*, i.e. the tokens in the target's
  forward pass. V = 1 is plain decoding.
- scores are cumulative draft log-probabilities along the path from the root (root = 0).
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
    if depth <= 1:
        return 1
    return 1 + width + (depth - 2) * width * width


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
    """Node scores laid out as the simulator's traces hold them: ``[levels, W**2]``, level by
    level, each as ``frontier_scores`` lays it out."""
    out = np.empty((levels, width * width), dtype=np.float32)
    start = 1
    for level in range(levels):
        count = width if level == 0 else width * width
        out[level] = frontier_scores(scores[start:start + count], width)
        start += count
    return out


def overrides(policy: BatchPolicy, method: str) -> bool:
    """Whether ``policy`` decides ``method`` itself (the engine and replay skip asking otherwise)."""
    return getattr(type(policy), method) is not getattr(BatchPolicy, method)


class BatchPolicy(ABC):
    """A policy written once over arrays of sequences: the simulator steps thousands of them per
    call, the real engine its busy rows (one at batch 1), through the same methods. Per-row state
    lives in arrays sized by ``reset_batch``; ``rows`` index into them; subclasses override the
    methods their method decides.

    Observations are the same on both sides: frontier scores as ``[rows, W**2]`` (sorted, -inf
    padded) and tree scores as ``[rows, depth - 1, W**2]`` (level by level, sorted), rounded to
    float16 as traces store them, so that a threshold decides alike in the engine and in replay."""

    name: str = "policy"
    # Which decision time a method is charged per cycle, in one vocabulary: a baseline's name as
    # ``--baselines`` spells it (its time measured by calibrate, in the profile's
    # ``policy_seconds``), "static" for any fixed tree, or "policy:<folder>" for a learned
    # policy (its own measured time, from its policy.json).
    family: str = "static"
    width: int = 10
    # Token-cache rules set this: ``observe_batch`` then also gets ``hits``, how many of each
    # row's accepted drafts were already in the cache (the prompt and every token committed
    # before them). Replay reads them off the traces, the engine counts them (``count_cache_hits``).
    reads_cache: bool = False
    # Sequences the target verifies together in one forward, set by whatever drives the policy
    # before ``reset_batch``: 1 in replay and the engine at batch 1, B in replay at batch B
    # (``simspec.sim.replay``) and the engine at batch B. Batch-aware rules (SGLang's adaptive
    # steps, vLLM's per-batch-size K) read it; replay's rows are independent sequences, not a batch.
    # Under load (``simspec.sim.load``) it is set before every cycle, to the batch the cycle runs
    # at, and ``waiting`` to the requests that have arrived but have no row yet.
    batch_size: int = 1
    waiting: int = 0
    # A policy that drafts one tree of fixed shape (Sequoia's) sets it: the engines build that
    # tree, replay reads its acceptance off the traces' child ranks; None: (D, W, top-V) trees.
    shape: TreeShape | None = None

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

    def observe_batch(self, rows: np.ndarray, depth: np.ndarray, size: np.ndarray,  # noqa: B027 (optional hook)
                      accepted: np.ndarray) -> None:
        """What the target accepted, per row."""


def count_cache_hits(cache: set[int], tokens: list[int], accepted: int) -> int:
    """How many of a cycle's ``accepted`` drafts (the first of ``tokens``, the committed ones) were
    already in ``cache`` (the prompt and every token committed before them), adding every
    committed token to it: token by token, as replay counts them off the traces
    (``TraceSet.cache_hits``)."""
    hits = 0
    for i, token in enumerate(tokens):
        hits += i < accepted and token in cache
        cache.add(token)
    return hits


def drafted_depths(policy: BatchPolicy, rows: np.ndarray, planned: np.ndarray,
                   frontier_of: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """The depths ``policy`` drafts to, asked step by step as the engine asks (after every draft
    step but the last), for many rows at once. ``frontier_of(idx, depth)`` gives the newest
    level's scores of rows ``idx`` at ``depth`` levels, laid out as the traces hold them."""
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
    policy = StaticPolicy(depth=8, width=10, size=60)
    policy.name = "eagle3"
    return policy


class StaticPolicy(BatchPolicy):
    """The same (D, W, V) every cycle. ``StaticPolicy(8, 10, 60)`` is EAGLE-3's default."""

    def __init__(self, depth: int, width: int, size: int) -> None:
        self._plan = DraftPlan(depth=depth, width=width, size=size)
        self.width = width
        self.name = f"static(D={depth},W={width},V={size})"

    def plan_batch(self, rows: np.ndarray, context: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.full(len(rows), self._plan.depth), np.full(len(rows), self._plan.size)
