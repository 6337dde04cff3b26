"""Recorded draft trees: everything replay needs, nothing it does not (numpy only).

For greedy decoding, a cycle's accepted length is fixed by the draft tree and the target's
greedy continuation. A trace set stores, for every prompt, that continuation and, at every
position ``p`` of it (root = continuation token ``p``), the tree the drafter builds to
``depth_max`` levels at ``width``, reduced to two arrays:

``path_rank[p, j - 1, D - 2]`` (int16), for path depth ``j`` in 1..depth_max-1 and tree depth
    ``D`` in 2..depth_max: the rank (0 = best) of the tree node at depth ``j`` on the target's
    greedy path among all non-root nodes of depth < D, in the engine's order (cumulative score
    descending, ties to the shallower then earlier node). ``NO_NODE`` where the greedy path
    leaves the tree before depth ``j`` or where ``j >= D``. Top-V verification keeps the root
    and the V-1 best non-root nodes, a set closed under ancestors, so the accepted length of
    (D, V) is the number of path nodes with rank < V-1: ``accepted_lengths``.
``level_scores[p, l - 1, :]`` (float16), for level ``l`` in 1..depth_max-1: the cumulative
    log-prob scores of the level's nodes, sorted descending (level 1 has W nodes, the rest of
    the row is -inf; every later level holds all W**2 candidates): what LTD and RADAR observe.
``best_child_logprobs[p, l - 1, :]`` (float16): the conditional log-probs of the W children
    of level l-1's best node (the root for l = 1), best first (SVIP's and RADAR's confidence).

``child_rank[p, j - 1]`` (int16), for path depth ``j`` in 1..depth_max-1: the rank (0 = best) of
    the greedy token at depth ``j`` among the drafter's children of the greedy path's depth
    ``j - 1`` node, the drafter fed the greedy path itself (not the beam's frontier, so a rank
    exists below every path node): ``NO_NODE`` where it is not among the best ``RANK_CAP``, -1
    where unobserved (past the continuation or a ``NO_NODE``). Any tree of fixed shape replays
    from it (``simspec.policies.shape``); Sequoia estimates its acceptance by rank from it.
    Greedy traces only; ``[positions, 0]`` in traces recorded before it was.

Plus ``context_length[p]`` (prompt + accepted tokens before the root), per-prompt offsets and
``prompt_tokens`` (the prompts' token ids, concatenated, for ``cache_hits``; empty in older traces).

At temperature T > 0 (``meta.temperature``, 0 or absent: greedy) acceptance is random and
the continuation is a seeded sample from the target. There is no greedy path (``path_rank``
is all ``NO_NODE``); instead every position stores the nodes any (D, V <= ``meta.nodes``)
cycle can verify, the union over D of the best ``nodes`` nodes of depth < D, in the engine's
order (root first, so parents precede children), padded to a common count K:

``node_depth[p, k]`` (int8, ``PAD_DEPTH`` past the position's nodes), ``node_parent[p, k]``
    (int16, the parent's column; the root and padding -1), ``node_prob[p, k]`` (float32): the
    target's probability of the node's token given its parent's path, at the traces'
    temperature and top-p; ``node_token[p, k]`` (int32) the token (``simspec.sim.stochastic``).
    Greedy traces hold these arrays with K = 0.
Trees are drafted one position at a time, as if every earlier cycle had accepted nothing; a
drafter's state depends on the committed tokens only, not on how they were committed, up to
floating-point rounding (the replay check in ``simspec calibrate`` measures the consequence).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from simspec.errors import SimspecError
from simspec.schema import Artifact
from simspec.sim.stochastic import acceptance_tails, pruned_tails, sample_accepted, stored_reach

NO_NODE = np.iinfo(np.int16).max
PAD_DEPTH = np.iinfo(np.int8).max
ARRAYS = ("prompt_offsets", "tokens", "token_offsets", "prompt_lengths", "context_length", "path_rank",
          "level_scores", "best_child_logprobs")
NODE_DTYPES = {"node_depth": np.int8, "node_parent": np.int16, "node_prob": np.float32, "node_token": np.int32}
NODE_ARRAYS = tuple(NODE_DTYPES)
# Stored, but kept out of the content hash: the prompt ids and the target (both in the meta)
# determine them, and adding them to traces recorded without them keeps every profile and
# policy built on those traces valid.
DERIVED_ARRAYS = ("prompt_tokens", "child_rank")
RANK_CAP = 16  # child ranks recorded along the greedy path: no shaped tree keeps more children


TRACE_SCHEMA = "simspec-traces"
TRACE_VERSION = 2  # 2 added the temperature and the node arrays; version 1 (greedy) still loads


@dataclass(frozen=True, kw_only=True)
class TraceMeta(Artifact):
    """``traces.json``: models, prompts, tree shape, sampling and recorder; ``content_hash`` on saving."""

    SCHEMA: ClassVar[str] = TRACE_SCHEMA
    VERSIONS: ClassVar[tuple[int, ...]] = (1, TRACE_VERSION)
    width: int
    depth_max: int | None = None
    content_hash: str | None = None
    target: str | None = None
    draft: str | None = None
    prompts: str | None = None  # the prompt set's name
    dataset: str | None = None
    prompt_ids: list | None = None  # one per prompt
    splits: list | None = None  # "train" or "heldout", one per prompt
    temperature: float = 0.0
    top_p: float = 1.0
    nodes: int | None = None  # the most nodes a cycle may verify (T > 0)
    dtype: str = "fp32"
    draft_fingerprint: str | None = None
    seed: int | None = None
    threads: int | None = None


@dataclass
class TraceSet:
    prompt_offsets: np.ndarray  # [n_prompts + 1] into the position axis
    tokens: np.ndarray  # greedy continuations, concatenated (int32)
    token_offsets: np.ndarray  # [n_prompts + 1] into ``tokens``
    prompt_lengths: np.ndarray  # [n_prompts]
    context_length: np.ndarray  # [positions] int32
    path_rank: np.ndarray  # [positions, depth_max - 1, depth_max - 1] int16
    level_scores: np.ndarray  # [positions, depth_max - 1, width**2] float16
    best_child_logprobs: np.ndarray  # [positions, depth_max - 1, width] float16
    meta: TraceMeta  # a dict is read into one
    node_depth: np.ndarray | None = None  # [positions, K] int8 (T > 0 only; K = 0 when greedy)
    node_parent: np.ndarray | None = None  # [positions, K] int16
    node_prob: np.ndarray | None = None  # [positions, K] float32
    node_token: np.ndarray | None = None  # [positions, K] int32
    prompt_tokens: np.ndarray | None = None  # [sum(prompt_lengths)] int32, or empty when not stored
    child_rank: np.ndarray | None = None  # [positions, depth_max - 1] int16, or [positions, 0] when not stored
    _tails: np.ndarray | None = field(default=None, repr=False, compare=False)
    _seen: np.ndarray | None = field(default=None, repr=False, compare=False)
    _reach: np.ndarray | None = field(default=None, repr=False, compare=False)
    _pruned: dict = field(default_factory=dict, repr=False, compare=False)  # (D, V, k): pruned_tails

    def __post_init__(self) -> None:
        if isinstance(self.meta, dict):
            self.meta = TraceMeta.of(self.meta)
        n = len(self.context_length)
        for name, dtype in NODE_DTYPES.items():
            if getattr(self, name) is None:
                setattr(self, name, np.zeros((n, 0), dtype=dtype))
        if self.prompt_tokens is None:
            self.prompt_tokens = np.zeros(0, dtype=np.int32)
        if self.child_rank is None:
            self.child_rank = np.zeros((n, 0), dtype=np.int16)

    @property
    def temperature(self) -> float:
        return float(self.meta.temperature)

    @property
    def sampled(self) -> bool:
        """Recorded at T > 0: acceptance is random and read off the node probabilities."""
        return self.temperature > 0

    @property
    def nodes(self) -> int:
        """The most nodes a cycle may verify on these traces (root included); greedy: unbounded."""
        return int(self.meta.nodes) if self.sampled else 1 << 30

    def tails(self) -> np.ndarray:
        """P(accepted >= d) for every position, tree depth D = 2..depth_max and size V =
        1..nodes: [positions, depth_max - 1, nodes, depth_max] float32, built once on first use."""
        if self._tails is None:
            self._tails = acceptance_tails(self.node_depth, self.node_parent, self.node_prob, self.depth_max,
                                           self.nodes)
        return self._tails

    @property
    def has_prompt_tokens(self) -> bool:
        return len(self.prompt_tokens) == int(self.prompt_lengths.sum()) > 0

    def child_ranks(self, rows: np.ndarray) -> np.ndarray:
        """``child_rank`` at ``rows``; one error where these traces cannot replay a tree of fixed shape."""
        if self.sampled:
            raise SimspecError("a tree of fixed shape (sequoia) replays greedy traces only: these were recorded at "
                               f"T = {self.temperature:g}; use greedy traces (temperature 0)")
        if self.child_rank.shape[1] == 0:
            raise SimspecError("these traces hold no child ranks, which trees of fixed shape (sequoia) replay from: "
                               "record them again (`simspec calibrate --traces-only ... --force`) or add them with "
                               "`simspec migrate-traces --traces FOLDER`")
        return self.child_rank[rows]

    def cache_hits(self, rows: np.ndarray, accepted: np.ndarray) -> np.ndarray:
        """How many of the ``accepted`` drafts of cycles at ``rows`` were already in the token cache
        (the prompt and every earlier token; seed 003's cache-enabled FSM). Policy-independent per
        token, so computed once per trace set, as a prefix sum."""
        if self._seen is None:
            if not self.has_prompt_tokens:
                raise SimspecError("these traces hold no prompt tokens, which token-cache rules need: record them "
                                   "again with this simspec (`simspec calibrate --traces-only ... --force`)")
            seen = np.zeros(len(self.tokens), dtype=np.int64)
            for i, prompt in enumerate(self.prompt_token_lists()):
                cache = set(prompt.tolist())
                first = int(self.token_offsets[i])
                for k, token in enumerate(self.continuation(i).tolist()):
                    seen[first + k] = token in cache
                    cache.add(token)
            self._seen = np.concatenate([[0], np.cumsum(seen)])
        prompt = np.searchsorted(self.prompt_offsets, rows, side="right") - 1
        root = self.token_offsets[prompt] + (rows - self.prompt_offsets[prompt])  # the root's token index
        end = np.minimum(root + accepted, self.token_offsets[prompt + 1] - 1)
        return self._seen[end + 1] - self._seen[root + 1]

    def _tail(self, rows: np.ndarray, depth: np.ndarray, size: np.ndarray) -> np.ndarray:
        """P(accepted >= d) of (depth, size) cycles at ``rows`` (depths below 2 read D = 2's row)."""
        return self.tails()[rows, np.minimum(np.maximum(depth - 2, 0), self.depth_max - 2),
                            np.minimum(np.maximum(size, 1), self.nodes) - 1]

    def verify(self, rows: np.ndarray, depth: np.ndarray, size: np.ndarray, rng: np.random.Generator | None = None,
               children: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(nodes verified, accepted drafts) of (depth, size) cycles at ``rows``: the top-V set, or with
        ``children`` each node keeping that many of its best children (Re-SpS's top-k), drawn with ``rng``."""
        if children is None:
            return size, self.accepted(rows, depth, size, rng)
        nodes, tail = self.pruned_tails(rows, depth, size, children)
        return np.where(np.asarray(depth) >= 2, nodes, 1), self._drawn(tail, depth, rng)

    def pruned_tails(self, rows: np.ndarray, depth, size, children) -> tuple[np.ndarray, np.ndarray]:
        """(nodes verified, P(accepted >= d)) of those cycles (``stochastic.pruned_tails``), each (D, V, k)
        computed over every position once. Sampled traces only: greedy ones hold the greedy path, not trees."""
        if not self.sampled:
            raise SimspecError("trees pruned to each node's best k children (Re-SpS's top-k) replay from sampled "
                               "traces (T > 0): keep k at the traces' width, or record at T > 0")
        keys = np.stack([np.clip(depth, 2, self.depth_max), np.clip(size, 1, self.nodes),
                         np.minimum(children, self.width)], 1).astype(np.int64)
        unique, which = np.unique(keys, axis=0, return_inverse=True)
        nodes, tail = np.ones(len(rows), dtype=np.int64), np.zeros((len(rows), self.depth_max), dtype=np.float32)
        for i, key in enumerate(map(tuple, unique.tolist())):
            if key not in self._pruned:
                if self._reach is None:
                    self._reach = stored_reach(self.node_depth, self.node_parent, self.node_prob, self.depth_max)
                self._pruned[key] = pruned_tails(self.node_depth, self.node_parent, self._reach, *key, self.depth_max)
            at = which.reshape(-1) == i
            nodes[at], tail[at] = self._pruned[key][0][rows[at]], self._pruned[key][1][rows[at]]
        return nodes, tail

    def accepted(self, rows: np.ndarray, depth: np.ndarray, size: np.ndarray,
                 rng: np.random.Generator | None = None) -> np.ndarray:
        """Accepted drafts of (depth, size) cycles at ``rows``: off the greedy path, or drawn with ``rng``."""
        if not self.sampled:
            return accepted_at(self.path_rank, rows, depth, size)
        return self._drawn(self._tail(rows, depth, size), depth, rng)

    @staticmethod
    def _drawn(tail: np.ndarray, depth: np.ndarray, rng: np.random.Generator | None) -> np.ndarray:
        """Accepted lengths drawn from ``tail`` = P(accepted >= d), one uniform per cycle; 0 at depth 1."""
        if rng is None:
            raise ValueError("traces recorded at T > 0 need a random generator to draw acceptance")
        return np.where(np.asarray(depth) >= 2, sample_accepted(tail, rng.random(len(tail))), 0)

    def expected_accepted(self, rows: np.ndarray, depth: np.ndarray, size: np.ndarray) -> np.ndarray:
        """E[accepted draft tokens] of (depth, size) cycles at ``rows`` (greedy: the value itself)."""
        if not self.sampled:
            return accepted_at(self.path_rank, rows, depth, size).astype(np.float64)
        tail = self._tail(rows, depth, size)
        return np.where(depth >= 2, tail[:, 1:].sum(-1, dtype=np.float64), 0.0)

    def accepted_distribution(self, rows: np.ndarray, depth: np.ndarray, size: np.ndarray) -> np.ndarray:
        """P(accepted = a), a = 0..depth_max - 1, of (depth, size) cycles at ``rows`` (greedy: one-hot)."""
        if not self.sampled:
            a = accepted_at(self.path_rank, rows, depth, size)
            return (a[:, None] == np.arange(self.depth_max)[None, :]).astype(np.float64)
        tail = self._tail(rows, depth, size)
        tail = np.where((depth >= 2)[:, None], tail, (np.arange(self.depth_max) == 0)[None, :]).astype(np.float64)
        return tail - np.concatenate([tail[:, 1:], np.zeros((len(tail), 1))], 1)

    @property
    def depth_max(self) -> int:
        return self.path_rank.shape[1] + 1

    @property
    def width(self) -> int:
        return int(self.meta.width)

    @property
    def n_prompts(self) -> int:
        return len(self.prompt_offsets) - 1

    @property
    def positions(self) -> int:
        return len(self.context_length)

    def prompt_positions(self, i: int) -> slice:
        return slice(int(self.prompt_offsets[i]), int(self.prompt_offsets[i + 1]))

    def continuation(self, i: int) -> np.ndarray:
        return self.tokens[self.token_offsets[i]:self.token_offsets[i + 1]]

    def prompt_token_lists(self) -> list[np.ndarray]:
        """Each prompt's tokens (views into ``prompt_tokens``; traces that hold them)."""
        return np.split(self.prompt_tokens, np.cumsum(self.prompt_lengths)[:-1]) if self.n_prompts else []

    def content_hash(self) -> str:
        digest = hashlib.sha256()
        # Greedy traces' empty node arrays stay out, so their hashes are what version 1 wrote.
        for name in ARRAYS + (NODE_ARRAYS if self.sampled else ()):
            array = np.ascontiguousarray(getattr(self, name))
            digest.update(f"{name}:{array.dtype}:{array.shape}".encode())
            digest.update(array.tobytes())
        return digest.hexdigest()[:16]

    def subset(self, prompts: np.ndarray) -> TraceSet:
        """The traces of the given prompt indices (in that order)."""
        pos = np.concatenate([np.arange(self.prompt_offsets[i], self.prompt_offsets[i + 1]) for i in prompts])
        tok = np.concatenate([np.arange(self.token_offsets[i], self.token_offsets[i + 1]) for i in prompts])
        counts, tcounts = np.diff(self.prompt_offsets)[prompts], np.diff(self.token_offsets)[prompts]
        prompt_tokens = self.prompt_tokens
        if self.has_prompt_tokens:
            every = self.prompt_token_lists()
            prompt_tokens = np.concatenate([every[i] for i in prompts] + [np.zeros(0, np.int32)])
        meta = self.meta.with_(**{key: [getattr(self.meta, key)[i] for i in prompts]
                                  for key in ("prompt_ids", "splits") if getattr(self.meta, key) is not None})
        return TraceSet(np.concatenate([[0], np.cumsum(counts)]), self.tokens[tok],
                        np.concatenate([[0], np.cumsum(tcounts)]), self.prompt_lengths[prompts],
                        self.context_length[pos], self.path_rank[pos], self.level_scores[pos],
                        self.best_child_logprobs[pos], meta, self.node_depth[pos], self.node_parent[pos],
                        self.node_prob[pos], self.node_token[pos], prompt_tokens, self.child_rank[pos])


def accepted_lengths(path_rank: np.ndarray, depth: np.ndarray | int, size: np.ndarray | int) -> np.ndarray:
    """Accepted drafts of trees of ``depth`` levels verified at ``size`` nodes (root included), per
    row of ``path_rank``; ``depth`` and ``size`` broadcast. Depth 1 drafts nothing: 0."""
    n = path_rank.shape[0]
    return accepted_at(path_rank, np.arange(n), np.broadcast_to(np.asarray(depth), (n,)),
                       np.broadcast_to(np.asarray(size), (n,)))


def accepted_at(path_rank: np.ndarray, rows: np.ndarray, depth: np.ndarray, size: np.ndarray) -> np.ndarray:
    """``accepted_lengths(path_rank[rows], depth, size)``, gathering only each row's column (hot path)."""
    levels = path_rank.shape[1]
    column = np.minimum(np.maximum(depth - 2, 0), levels - 1)  # not np.clip: its overhead, per cycle
    ranks = path_rank[rows[:, None], np.arange(levels)[None, :], column[:, None]]
    accepted = (ranks < (size - 1)[:, None]).sum(axis=1)
    return np.where(depth >= 2, accepted, 0)


@dataclass
class PromptTrace:
    continuation: np.ndarray  # greedy tokens, the first one from the prefill
    context_length: np.ndarray  # [positions]
    path_rank: np.ndarray  # [positions, depth_max - 1, depth_max - 1]
    level_scores: np.ndarray  # [positions, depth_max - 1, width**2]
    best_child_logprobs: np.ndarray  # [positions, depth_max - 1, width]
    near_tie_cut: bool  # the batched continuation disagreed with the checking pass and was cut there
    node_depth: np.ndarray | None = None  # [positions, K_p] (T > 0)
    node_parent: np.ndarray | None = None
    node_prob: np.ndarray | None = None
    node_token: np.ndarray | None = None
    child_rank: np.ndarray | None = None  # [positions, depth_max - 1] (greedy)


def assemble(traces: list[PromptTrace], prompts: list[list[int]] | list[int], meta: dict) -> TraceSet:
    """One trace set from per-prompt traces; ``prompts``: their token ids (or only their lengths)."""
    prompt_lengths = [p if isinstance(p, (int, np.integer)) else len(p) for p in prompts]
    prompt_tokens = None if any(isinstance(p, (int, np.integer)) for p in prompts) else \
        np.concatenate([np.asarray(p, dtype=np.int32) for p in prompts] + [np.zeros(0, np.int32)])
    counts, tcounts = [len(t.context_length) for t in traces], [len(t.continuation) for t in traces]
    levels, width2 = meta["depth_max"] - 1, meta["width"] ** 2
    return TraceSet(
        prompt_offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        tokens=np.concatenate([t.continuation for t in traces] + [np.zeros(0)]).astype(np.int32),
        token_offsets=np.concatenate([[0], np.cumsum(tcounts)]).astype(np.int64),
        prompt_lengths=np.asarray(prompt_lengths, dtype=np.int32),
        context_length=np.concatenate([t.context_length for t in traces] + [np.zeros(0)]).astype(np.int32),
        path_rank=np.concatenate([t.path_rank for t in traces] + [np.zeros((0, levels, levels), np.int16)]),
        level_scores=np.concatenate([t.level_scores for t in traces] + [np.zeros((0, levels, width2), np.float16)]),
        best_child_logprobs=np.concatenate([t.best_child_logprobs for t in traces]
                                           + [np.zeros((0, levels, meta["width"]), np.float16)]),
        meta=meta,
        prompt_tokens=prompt_tokens,
        child_rank=None if any(t.child_rank is None for t in traces) else
        np.concatenate([t.child_rank for t in traces] + [np.zeros((0, levels), np.int16)]),
        **_node_tables(traces),
    )


def pad_node_rows(rows: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]) -> dict[str, np.ndarray]:
    """Node arrays from positions' (depth, parent, prob, token) rows, padded to the longest row
    (depth ``PAD_DEPTH``, parent -1, probability and token 0)."""
    n, k = len(rows), max((len(r[0]) for r in rows), default=1)
    out = {"node_depth": np.full((n, k), PAD_DEPTH, np.int8), "node_parent": np.full((n, k), -1, np.int16),
           "node_prob": np.zeros((n, k), np.float32), "node_token": np.zeros((n, k), np.int32)}
    for i, row in enumerate(rows):
        for name, values in zip(NODE_ARRAYS, row):
            out[name][i, :len(values)] = values
    return out


def _node_tables(traces: list[PromptTrace]) -> dict:
    """The prompts' node arrays padded to one column count (none: greedy traces)."""
    if all(t.node_depth is None for t in traces):
        return {}
    return pad_node_rows([row for t in traces for row in zip(*(getattr(t, name) for name in NODE_ARRAYS))])
