"""The one policy interface, shared unchanged by the real engine and the simulator.

A draft-and-verify cycle offers a policy three decision points, the ones the seed papers use:

1. ``plan``            before drafting: the cycle's tree budget (D, W, V) — Re-SpS picks
                       (total tokens, depth, top-k) here and may hold it for N cycles.
2. ``keep_drafting``   after every draft step: CONTINUE or STOP, seeing the newest level's
                       candidate scores, the depth so far and the context length — LTD's
                       depth policy, RADAR, DDD, SVIP.
3. ``choose_size``     once the tree is built: how many nodes the target verifies, seeing
                       every node's score — LTD's size policy.

``observe`` then reports what the target accepted, for adaptive baselines (GammaTune, the
analytic window, FSMs, Q-learning); ``see_context`` hands rules that keep a token cache (seed
003's cache-enabled FSM) the tokens committed before the first cycle.

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
from dataclasses import dataclass, field
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


@dataclass(frozen=True)
class CycleStart:
    """What a policy sees before drafting."""

    cycle: int  # 0-based index of the cycle within this sequence
    context_length: int  # tokens the target has committed (prompt + generated)
    batch_size: int = 1  # sequences the engine decodes together (each with its own tree)


def _no_scores() -> np.ndarray:
    return np.zeros(0, dtype=np.float32)


@dataclass(frozen=True)
class DraftStep:
    """What a policy sees after a draft step. Scores are fetched lazily: on a GPU reading
    them costs a device sync, which a policy that ignores them should not pay."""

    depth: int  # levels drafted so far, root included (2 after the first draft step)
    width: int
    context_length: int
    _frontier: Callable[[], np.ndarray] = field(default=_no_scores, repr=False)

    @property
    def frontier_logprobs(self) -> np.ndarray:
        """Cumulative log-probs of the newest level's candidates: W at depth 2, W**2 after."""
        return self._frontier()


@dataclass(frozen=True)
class BuiltTree:
    """What a policy sees once drafting stopped."""

    depth: int
    width: int
    context_length: int
    n_nodes: int
    _scores: Callable[[], np.ndarray] = field(default=_no_scores, repr=False)

    @property
    def node_logprobs(self) -> np.ndarray:
        """Cumulative log-probs of every node, root first, level by level."""
        return self._scores()


@dataclass(frozen=True)
class CycleOutcome:
    """What the target did with the tree."""

    plan: DraftPlan
    depth: int  # levels actually drafted
    size: int  # nodes actually verified (root included)
    accepted: int  # draft tokens accepted (the bonus token not counted)
    tokens: tuple[int, ...] = ()  # the tokens committed: the accepted drafts, then the target's bonus token


class Costs(Protocol):
    """What a cost-aware policy reads of a latency model (``simspec.sim.costmodel.CostModel``
    satisfies it): seconds per draft step, per verification and per whole cycle."""

    def draft(self, nodes, context) -> np.ndarray: ...

    def verify(self, size, context) -> np.ndarray: ...

    def cycle(self, depth, width, size, context, committed) -> np.ndarray: ...


class Policy(ABC):
    """Base class: subclasses override the hooks their method uses."""

    name: str = "policy"
    # Which decision time a method is charged per cycle, in one vocabulary: a baseline's name as
    # ``--baselines`` spells it (its time measured by calibrate, in the profile's
    # ``policy_seconds``), "static" for any fixed tree, or "policy:<folder>" for a learned
    # policy (its own measured time, from its policy.json).
    family: str = "static"

    def reset(self) -> None:  # noqa: B027 (optional hook)
        """A new sequence starts; forget per-sequence state."""

    def see_context(self, tokens: list[int]) -> None:  # noqa: B027 (optional hook)
        """The tokens committed before the first cycle (the prompt, then the prefill's token)."""

    @abstractmethod
    def plan(self, start: CycleStart) -> DraftPlan:
        """The cycle's budget (D, W, V)."""

    def keep_drafting(self, step: DraftStep, plan: DraftPlan) -> bool:
        """Default: draft until the plan's depth is reached."""
        return step.depth < plan.depth

    def choose_size(self, tree: BuiltTree, plan: DraftPlan) -> int:
        """Default: the plan's size (the engine caps it at the tree's node count)."""
        return plan.size

    def observe(self, outcome: CycleOutcome) -> None:  # noqa: B027 (optional hook)
        """Feedback after verification; default: ignore."""


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


class BatchPolicy(Policy):
    """A policy written once over arrays of sequences, so the simulator can step thousands of
    them per call, while the real engine drives the same object through the per-cycle hooks
    (which run the batch methods on a batch of one). Per-row state lives in arrays sized by
    ``reset_batch``; ``rows`` index into them.

    Observations are the same on both sides: frontier scores as ``[rows, W**2]`` (sorted, -inf
    padded) and tree scores as ``[rows, depth - 1, W**2]`` (level by level, sorted), rounded to
    float16 as traces store them, so that a threshold decides alike in the engine and in replay."""

    width: int = 10
    # Token-cache rules set this: ``observe_batch`` then also gets ``hits``, how many of each
    # row's accepted drafts were already in the cache (the prompt and every token committed
    # before them). Replay reads them off the traces; the engine's hooks keep the cache here.
    reads_cache: bool = False
    # Sequences the target verifies together in one forward, set by whatever drives the policy
    # before ``reset_batch``: 1 in replay and the one-sequence engine, B in batched replay
    # (``simspec.sim.batch``) and the batched engine. Batch-aware rules (SGLang's adaptive
    # steps, vLLM's per-batch-size K) read it; replay's rows are independent sequences, not a batch.
    batch_size: int = 1
    # A policy that drafts one tree of fixed shape (Sequoia's) sets it: the engines build that
    # tree, replay reads its acceptance off the traces' child ranks; None: (D, W, top-V) trees.
    shape: TreeShape | None = None

    def reset_batch(self, n: int) -> None:
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

    def observe_batch(self, rows: np.ndarray, depth: np.ndarray, size: np.ndarray, accepted: np.ndarray) -> None:
        """What the target accepted, per row."""

    # The per-cycle hooks of one sequence, for the real engine: row 0 of a batch of one.
    _ROW = np.zeros(1, dtype=np.int64)

    def reset(self) -> None:
        self.batch_size = 1
        self.reset_batch(1)

    def plan(self, start: CycleStart) -> DraftPlan:
        depth, size = self.plan_batch(self._ROW, np.array([start.context_length]))
        self._planned = (int(depth[0]), int(size[0]))
        return DraftPlan(self._planned[0], self.width, self._planned[1], self.shape)

    def keep_drafting(self, step: DraftStep, plan: DraftPlan) -> bool:
        frontier = frontier_scores(step.frontier_logprobs, self.width)
        go = self.keep_drafting_batch(self._ROW, np.array([step.depth]), frontier[None], np.array([plan.depth]))
        return bool(go[0])

    def choose_size(self, tree: BuiltTree, plan: DraftPlan) -> int:
        scores = sorted_levels(tree.node_logprobs, tree.width, tree.depth - 1)
        size = self.choose_size_batch(self._ROW, np.array([tree.depth]), scores[None], np.array([plan.size]))
        return int(size[0])

    def see_context(self, tokens: list[int]) -> None:
        self._cache = set(tokens)

    def observe(self, outcome: CycleOutcome) -> None:
        extra = {}
        if self.reads_cache:
            hits = 0
            for i, token in enumerate(outcome.tokens):  # token by token, as replay counts them
                hits += i < outcome.accepted and token in self._cache
                self._cache.add(token)
            extra["hits"] = np.array([hits])
        self.observe_batch(self._ROW, np.array([outcome.depth]), np.array([outcome.size]),
                           np.array([outcome.accepted]), **extra)


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

    # Constant answers need no observation: skip the array plumbing on the engine's hot path.
    def plan(self, start: CycleStart) -> DraftPlan:
        return self._plan

    def keep_drafting(self, step: DraftStep, plan: DraftPlan) -> bool:
        return step.depth < plan.depth

    def choose_size(self, tree: BuiltTree, plan: DraftPlan) -> int:
        return plan.size

    def observe(self, outcome: CycleOutcome) -> None:
        pass

    def plan_batch(self, rows: np.ndarray, context: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.full(len(rows), self._plan.depth), np.full(len(rows), self._plan.size)
