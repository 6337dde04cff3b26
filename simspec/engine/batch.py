"""Batched decoding: ``B`` sequences decode together, plain or speculative, greedy or sampling
at a temperature.

A queue of prompts feeds ``B`` rows. Each cycle every busy row gets its own tree from the
policy, asked through its batch methods for every busy row at once, exactly as the simulator's
replay asks it (one object, a row per sequence: ``plan_batch``, ``keep_drafting_batch`` after
each draft step, ``choose_size_batch``, ``observe_batch``), rows in the queue's order; the
drafter runs every row's draft step in one forward per level, and one target forward verifies
all rows' trees, padded to the cycle's largest V with a mask per row. Acceptance and the
caches' moves are per row.

A finished sequence leaves its row, and the next prompt of the queue is prefilled into it
(alone, at batch 1) before the next cycle: continuous batching, as serving engines do. Once the
queue is empty a free row idles as padding, so every cycle costs a batch-``B`` forward; it holds
no context (``TargetRows.release``), so attention reads as far as the longest busy row.
``simspec.sim.batch`` replays the same rules.

Every sequence's output equals its own plain greedy decoding (the padded forwards only reorder
floating-point sums, which ``simspec.engine.lossless`` reports with the top-2 logit gap). At
T > 0 each sequence draws from its own generator (its seed: ``seeds``, by default the sampling's
seed plus its index in the queue), and every row's tree is verified by EAGLE's walk over
deterministic drafts (``TreeVerifier``), a chain (W = 1) included: the output's distribution is
the target's. (The batch-1 engine verifies a chain drafted by sampling with the q-aware rule.)"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from simspec.blas import one_blas_thread
from simspec.engine.batch_models import RowDrafter, TargetRows, batched
from simspec.engine.drafter import Drafter
from simspec.engine.kv_rows import causal
from simspec.engine.kv_slots import TREE_SLOTS
from simspec.engine.modeling import head_logits
from simspec.engine.models import LoadedModel
from simspec.engine.sampling import GREEDY, Sampling, TreeVerifier, row_distributions
from simspec.engine.speculative import CycleRecord, Generation, SpeculativeEngine, clock
from simspec.engine.tree import DraftTree, ShapedTree, Verification
from simspec.errors import SimspecError
from simspec.policies.base import BatchPolicy, frontier_scores, overrides, sorted_levels, tree_capacities


@dataclass(frozen=True)
class BatchCycle:
    """One batched cycle's shape and times, as the simulator prices it (``simspec.sim.batch``)."""

    depth: np.ndarray  # [busy rows] tree levels drafted (1 per row for a plain step)
    size: np.ndarray  # [busy rows] tokens verified (1 per row for a plain step)
    context: int  # the longest busy row's committed tokens: what the forwards' attention reads
    fed: int  # nodes the first draft level feeds: the most tokens a row committed last cycle
    draft_s: float
    verify_s: float  # a plain step's forward, for plain decoding
    policy_s: float
    bookkeeping_s: float  # the rest of the cycle


@dataclass
class BatchRun:
    """Every prompt's generation (input order) and the batch's totals."""

    generations: list[Generation]
    batch_size: int
    total_s: float  # wall time of the whole queue, prefills included
    cycles: int  # batched target forwards after the prefills
    idle_row_cycles: int = 0  # rows that rode along as padding, summed over cycles
    prefill_s: float = 0.0  # the batch's seconds in each part, summed over the run
    draft_s: float = 0.0
    verify_s: float = 0.0
    draft_forwards: int = 0  # the drafter's batched forwards (one per level of the cycle's deepest row)
    policy_s: float = 0.0  # in the policy's batch methods
    batch_cycles: list[BatchCycle] = field(default_factory=list)  # every cycle, in order

    def time_shares(self) -> dict[str, float]:
        """Share of the run's time drafting, verifying, prefilling, and in the rest (policies,
        trees, acceptance, cache moves): ``Generation.time_shares``' parts, for the batch."""
        rest = self.total_s - self.prefill_s - self.draft_s - self.verify_s - self.policy_s
        parts = {"draft": self.draft_s, "verify": self.verify_s, "policy": self.policy_s, "bookkeeping": max(0.0, rest),
                 "prefill": self.prefill_s}
        return {k: v / self.total_s for k, v in parts.items()}

    @property
    def tokens(self) -> int:
        return sum(len(g.tokens) for g in self.generations)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.total_s


@dataclass
class _Row:
    """The sequence a row decodes now."""

    index: int  # in the prompt list
    prompt: list[int]
    started: float
    prefill_s: float
    root: int  # the last committed token, not yet run through the target
    seen: set[int] = field(default_factory=set)  # prompt and committed tokens (token-cache policies)
    tokens: list[int] = field(default_factory=list)
    cycles: list[CycleRecord] = field(default_factory=list)


class BatchEngine:
    """Decoding of a queue of prompts, ``batch_size`` at a time, plainly or speculatively with
    ``drafter``: greedy, or sampling at ``sampling.temperature`` > 0 (``tree_verifier`` decides
    acceptance there; a deliberately broken one shows the statistical tests' power)."""

    def __init__(self, target: LoadedModel, drafter: Drafter, batch_size: int, runtime: str = "eager",
                 sampling: Sampling = GREEDY, tree_verifier: TreeVerifier | None = None) -> None:
        if batch_size < 1:
            raise SimspecError(f"--batch-size must be >= 1, got {batch_size}")
        self.target, self.drafter, self.batch = target, drafter, batch_size
        self.sampling, self.tree_verifier = sampling, tree_verifier or TreeVerifier()
        self._rngs: dict[int, np.random.Generator] = {}  # at T > 0: each queued sequence's generator
        # length checks, end-of-sequence tokens, the runtime's name checked
        self.single = SpeculativeEngine(target, drafter, sampling, runtime=runtime)
        self.runtime = runtime
        self.device = target.device
        self.tree_slots: int | None = None  # cache slack past a sequence's tokens (None: kv_slots.TREE_SLOTS)

    def _target_rows(self, capacity: int, feature_layers: tuple[int, ...] | None) -> TargetRows:
        if self.runtime == "compiled":
            from simspec.engine.compiled_rows import CompiledTargetRows

            return CompiledTargetRows(self.target, self.batch, capacity, feature_layers)
        return TargetRows(self.target, self.batch, capacity, feature_layers)

    def warm_up(self, prompt_lengths: list[int], max_new_tokens: int, sizes: Sequence[int] = ()) -> float:
        """Under the compiled runtime, compile every batch forward that plain decoding and trees of
        these sizes meet on a queue of prompts of these lengths, so that no timed run pays a
        compile; returns the seconds it took (0 when eager)."""
        if self.runtime == "eager":
            return 0.0
        from simspec.engine.runtime import bucket

        started = time.perf_counter()
        buckets = sorted({bucket(v) for v in sizes})
        self.tree_slots = max([1, *buckets, self.tree_slots or 0])  # never narrowed by a later warm-up
        capacity = max(prompt_lengths) + max_new_tokens + self.tree_slots
        with torch.inference_mode():
            for layers, sizes_run in ((None, [1]), (self.drafter.target_layers(), buckets)):
                if not sizes_run:
                    continue
                rows = self._target_rows(capacity, layers)
                rows.prefill(0, torch.zeros(1, dtype=torch.long, device=self.device))
                for size in sizes_run:
                    rows.forward({0: (np.zeros(size, dtype=np.int64), np.arange(size), causal(size))})
        return time.perf_counter() - started

    # -- the queue ---------------------------------------------------------------------------
    def _run(self, prompts: list[list[int]], max_new_tokens: int, policy: BatchPolicy | None,
             seeds: Sequence[int] | None = None) -> BatchRun:
        if not prompts:
            raise SimspecError("no prompts to decode")
        if not self.sampling.greedy:
            seeds = list(seeds) if seeds is not None else [self.sampling.seed + i for i in range(len(prompts))]
            if len(seeds) != len(prompts):
                raise SimspecError(f"{len(seeds)} seeds for {len(prompts)} prompts: one seed per prompt")
            self._rngs = {i: np.random.default_rng(seed) for i, seed in enumerate(seeds)}
        for p in prompts:
            self.single.check_length(p, max_new_tokens)
        capacity = max(len(p) for p in prompts) + max_new_tokens + (self.tree_slots or TREE_SLOTS)
        speculative = policy is not None
        if speculative:
            if not isinstance(policy, BatchPolicy):
                raise SimspecError(f"policy {policy.name} has no batch methods (simspec.policies.base.BatchPolicy): "
                                   "batches ask every row at once, as the simulator does")
            policy.batch_size = self.batch
            policy.reset_batch(len(prompts))  # a row per sequence: its index in the queue
            self._policy, self._policy_s = policy, 0.0
        drafter = batched(self.drafter, self.batch, capacity) if speculative else None
        target = self._target_rows(capacity, drafter.target_layers() if speculative and drafter.uses_target_hidden
                                   else None)
        queue = deque(enumerate(prompts))
        rows: list[_Row | None] = [None] * self.batch
        done: dict[int, Generation] = {}
        start = clock(self.device)
        cycles = idle = 0
        seconds = {"prefill": 0.0, "draft": 0.0, "verify": 0.0}
        self._forwards = 0
        self._log: list[BatchCycle] = []

        def admit(b: int) -> None:
            index, prompt = queue.popleft()
            t = clock(self.device)
            ids = torch.tensor(prompt, device=self.device)
            hidden, features = target.prefill(b, ids)
            root = self._pick(head_logits(target.head, hidden[-1:]), index)
            row = _Row(index, prompt, t, 0.0, root, tokens=[root])
            if speculative:
                wants = drafter.uses_target_hidden
                drafter.reset_row(b, ids, features if wants else None)
                drafter.commit(b, torch.tensor([root], device=self.device), features[-1:] if wants else None)
                row.seen = {*prompt, root}
            row.prefill_s = clock(self.device) - t
            seconds["prefill"] += row.prefill_s
            rows[b] = row

        def finished(row: _Row) -> bool:
            return len(row.tokens) >= max_new_tokens or any(t in self.single.eos for t in row.tokens)

        for b in range(min(self.batch, len(prompts))):
            admit(b)
        while any(r is not None for r in rows):
            busy = sorted((b for b, r in enumerate(rows) if r is not None), key=lambda b: rows[b].index)
            if speculative:
                draft_s, verify_s = self._cycle(target, drafter, rows, busy)
            else:
                draft_s, verify_s = 0.0, self._plain_step(target, rows, busy)
            seconds["draft"] += draft_s
            seconds["verify"] += verify_s
            cycles += 1
            idle += self.batch - len(busy)
            for b in busy:
                row = rows[b]
                if finished(row):
                    tokens = self.single._truncate(row.tokens, max_new_tokens)
                    done[row.index] = Generation(tokens, len(row.prompt), row.prefill_s,
                                                 clock(self.device) - row.started, row.cycles)
                    rows[b] = None
                    if queue:
                        admit(b)
                    else:  # padding from now on, priced (and run) at the busy rows' context
                        target.release(b)
                        if speculative:
                            drafter.release(b)
        return BatchRun([done[i] for i in range(len(prompts))], self.batch, clock(self.device) - start, cycles, idle,
                        seconds["prefill"], seconds["draft"], seconds["verify"], self._forwards,
                        self._policy_s if speculative else 0.0, self._log)

    # -- plain decoding: one token per row per step --------------------------------------------
    @torch.inference_mode()
    def plain(self, prompts: list[list[int]], max_new_tokens: int, seeds: Sequence[int] | None = None) -> BatchRun:
        """Plain decoding of every prompt (greedy, or sampling with ``seeds``), ``batch_size``
        sequences per forward."""
        return self._run(prompts, max_new_tokens, None, seeds)

    def _pick(self, logits: torch.Tensor, index: int) -> int:
        """The next token after ``logits`` for the queue's sequence ``index`` (its generator at T > 0),
        as the batch-1 engine picks it."""
        return self.single._next_token(logits, self._rngs.get(index))

    def _plain_step(self, target: TargetRows, rows: list[_Row | None], busy: list[int]) -> float:
        context = int(target.lengths[busy].max())
        t = clock(self.device)
        one = np.ones((1, 1), dtype=bool)
        hidden, _ = target.forward({b: (np.array([rows[b].root]), np.zeros(1, dtype=np.int64), one) for b in busy})
        logits = head_logits(target.head, hidden[:, 0])
        nxt = logits.argmax(-1).cpu().numpy() if self.sampling.greedy else \
            {b: self._pick(logits[b], rows[b].index) for b in busy}
        seconds = clock(self.device) - t
        ones = np.ones(len(busy), dtype=np.int64)
        self._log.append(BatchCycle(ones, ones, context, 1, 0.0, seconds, 0.0, 0.0))
        for b in busy:
            target.keep(b, np.zeros(1, dtype=np.int64))
            row = rows[b]
            row.root = int(nxt[b])
            row.tokens.append(row.root)
            row.cycles.append(CycleRecord(1, 1, 1, 0, 0, 0.0, seconds, 0.0, 0.0))
        return seconds

    # -- speculative decoding -------------------------------------------------------------------
    @torch.inference_mode()
    def generate(self, prompts: list[list[int]], policy: BatchPolicy, max_new_tokens: int,
                 seeds: Sequence[int] | None = None) -> BatchRun:
        """Speculative decoding of every prompt (greedy, or sampling with ``seeds``), every row's
        tree from ``policy``."""
        with one_blas_thread():  # as the batch-1 engine: policies multiply small matrices per cycle
            return self._run(prompts, max_new_tokens, policy, seeds)

    def _cycle(self, target: TargetRows, drafter: RowDrafter, rows: list[_Row | None], busy: list[int]
               ) -> tuple[float, float]:
        """One cycle of every busy row; the seconds drafting and verifying."""
        device, policy = self.device, self._policy
        t_start = clock(device)
        ids = np.array([rows[b].index for b in busy])
        lengths = target.lengths[busy]
        fed = max(rows[b].cycles[-1].accepted + 1 if rows[b].cycles else 1 for b in busy)
        t = clock(device)
        planned, sizes = policy.plan_batch(ids, lengths.copy())
        policy_s = clock(device) - t
        planned = np.maximum(np.asarray(planned, dtype=np.int64), 1)
        caps = np.maximum(1, np.minimum(planned, self.single.max_positions - lengths))
        width = policy.width
        shape = policy.shape
        trees = {b: DraftTree(rows[b].root, int(caps[i]), width) if shape is None else
                 ShapedTree(rows[b].root, int(caps[i]), shape) for i, b in enumerate(busy)}
        draft_calls, draft_s, decide_s = self._draft(drafter, trees, busy, ids, caps)
        policy_s += decide_s
        depth = np.array([trees[b].levels for b in busy])
        sizes = np.asarray(sizes, dtype=np.int64)
        if overrides(policy, "choose_size_batch"):
            levels = max(1, int(depth.max()) - 1)
            scores = np.full((len(busy), levels, width * width), -np.inf, dtype=np.float32)
            for i, b in enumerate(busy):
                if depth[i] > 1:
                    scores[i, : depth[i] - 1] = sorted_levels(trees[b].scores[: trees[b].n], width, depth[i] - 1)
            t = clock(device)
            sizes = np.asarray(policy.choose_size_batch(ids, depth, scores, sizes), dtype=np.int64)
            policy_s += clock(device) - t
        sizes = np.clip(sizes, 1, tree_capacities(depth, width))
        verifications: dict[int, Verification] = {b: trees[b].verification(int(sizes[i])) for i, b in enumerate(busy)}
        t = clock(device)
        hidden, features = target.forward({b: (v.tokens, v.depths, v.visible) for b, v in verifications.items()})
        logits = head_logits(target.head, hidden.reshape(-1, hidden.shape[-1])).view(*hidden.shape[:2], -1)
        target_next = logits.argmax(-1).cpu().numpy() if self.sampling.greedy else None
        verify_s = clock(device) - t

        drafter.end_cycle()
        accepted_counts, hits = np.zeros(len(busy), dtype=np.int64), np.zeros(len(busy), dtype=np.int64)
        for i, b in enumerate(busy):
            v, row = verifications[b], rows[b]
            accepted, bonus = self._accept(v, logits[b], target_next, b, row.index)
            target.keep(b, accepted)
            new_tokens = v.tokens[accepted].tolist()[1:] + [bonus]
            path = features[b, torch.as_tensor(accepted, device=device)] if drafter.uses_target_hidden else None
            drafter.commit(b, torch.tensor(new_tokens, device=device), path)
            accepted_counts[i] = len(accepted) - 1
            for k, token in enumerate(new_tokens):  # token by token, as replay counts cache hits
                hits[i] += k < accepted_counts[i] and token in row.seen
                row.seen.add(token)
            row.tokens.extend(new_tokens)
            row.root = new_tokens[-1]
        t = clock(device)
        extra = {"hits": hits} if policy.reads_cache else {}
        policy.observe_batch(ids, depth, np.array([len(verifications[b]) for b in busy]), accepted_counts, **extra)
        policy_s += clock(device) - t
        self._policy_s += policy_s
        total = clock(device) - t_start
        rest = max(0.0, total - draft_s - verify_s - policy_s)
        for i, b in enumerate(busy):  # the batch's times, on every row's record
            rows[b].cycles.append(CycleRecord(
                depth=int(depth[i]), width=width, size=len(verifications[b]), accepted=int(accepted_counts[i]),
                draft_calls=draft_calls[b], draft_s=draft_s, verify_s=verify_s, policy_s=policy_s,
                bookkeeping_s=rest))
        self._log.append(BatchCycle(depth, np.array([len(verifications[b]) for b in busy]), int(lengths.max()), fed,
                                    draft_s, verify_s, policy_s, rest))
        return draft_s, verify_s

    def _accept(self, v: Verification, logits: torch.Tensor, target_next: np.ndarray | None, b: int, index: int
                ) -> tuple[np.ndarray, int]:
        """Row ``b``'s accepted rows (root first) and the token after them: the target's greedy
        path, or at T > 0 the walk over its tree with the sequence's own generator."""
        if target_next is not None:
            return v.accept(target_next[b, : len(v)])
        return self.tree_verifier.accept(v.tokens, v.parent_rows, row_distributions(logits, self.sampling),
                                         self._rngs[index])

    def _draft(self, drafter: RowDrafter, trees: dict[int, DraftTree], busy: list[int], ids: np.ndarray,
               caps: np.ndarray) -> tuple[dict[int, int], float, float]:
        """Every row's tree, level by level, all rows still drafting in one forward per level; after
        each level the policy is asked CONTINUE / STOP for every row that could go on, in one call
        (``keep_drafting_batch``, as replay asks it). Returns draft calls per row, the seconds
        drafting and the seconds deciding."""
        device, policy = self.device, self._policy
        asks = overrides(policy, "keep_drafting_batch")
        cap = dict(zip(busy, caps.tolist()))
        row_id = dict(zip(busy, ids.tolist()))
        drafting = [b for b in busy if cap[b] > 1]
        calls = dict.fromkeys(trees, 0)
        seconds = decide = 0.0
        first = True
        while drafting:
            t = clock(device)
            if first:
                logprobs = list(drafter.draft_root(drafting)[:, None])
            else:
                logprobs = drafter.draft_level(drafting, [trees[b].feed_frontier() for b in drafting])
            children = [drafter.top_candidates(lp, trees[b].width) for b, lp in zip(drafting, logprobs)]
            seconds += clock(device) - t
            self._forwards += 1
            first = False
            frontier = {}
            for b, (top_logprobs, top_tokens) in zip(drafting, children):
                calls[b] += 1
                frontier[b] = trees[b].grow(top_logprobs, top_tokens)
            going = [b for b in drafting if trees[b].levels < cap[b]]
            if asks and going:
                table = np.stack([frontier_scores(frontier[b], trees[b].width) for b in going])
                t = clock(device)
                go = np.asarray(policy.keep_drafting_batch(
                    np.array([row_id[b] for b in going]), np.array([trees[b].levels for b in going]), table,
                    np.array([cap[b] for b in going])), bool)
                decide += clock(device) - t
                going = [b for b, g in zip(going, go) if g]
            drafting = going
        return calls, seconds, decide
