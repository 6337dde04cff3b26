"""The real tree speculative-decoding engine, batch-native: ``B`` rows decode a queue of prompts
together, plainly or speculatively, greedy or sampling at a temperature (one sequence is a batch
of one). One cycle, for every busy row at once:

    plan      = policy.plan_batch(rows, context)            # depth budget, size per row
    draft     : the root step, then level by level in one drafter forward per level,
                while policy.keep_drafting_batch says CONTINUE for the row
    size      = policy.choose_size_batch(rows, depth, tree scores, planned)
    verify    : each row's best ``size`` nodes (each keeping policy.children_batch of its own, when
                set) in one padded target forward, a tree mask per row
    accept    : per row, the longest path agreeing with the target's greedy tokens plus its bonus
                token (at T > 0: ``simspec.engine.sampling``'s rejection walk)
    trim      : each row keeps only its accepted tokens in the target's and the drafter's caches

The policy is asked as the simulator's replay asks it (rows in the queue's order). A finished
sequence's row takes the queue's next prompt before the next cycle (continuous batching); once
the queue is empty a free row idles as padding.

Greedy output equals plain greedy decoding token for token, whatever the policy, drafter or
batch, up to exact near-ties flipped by the padded forwards' float order (``engine.lossless``).
At T > 0 each sequence draws from its own generator (its seed); trees are verified by EAGLE's
walk (``TreeVerifier``), chains (W = 1) sampled from the drafter by the standard rule
(``ChainVerifier``): the output's distribution is the target's.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from itertools import takewhile

import numpy as np
import torch

from simspec.blas import one_blas_thread
from simspec.engine.batch_models import RowDrafter, TargetRows, batched
from simspec.engine.compiled_rows import target_rows
from simspec.engine.context import served_context
from simspec.engine.drafter import Drafter
from simspec.engine.kv_rows import TREE_SLOTS, causal
from simspec.engine.modeling import head_logits
from simspec.engine.models import LoadedModel, eos_token_ids
from simspec.engine.records import BatchCycle, BatchRun, CycleRecord, Generation, clock
from simspec.engine.sampling import (
    GREEDY,
    ChainVerifier,
    Sampling,
    TreeVerifier,
    distribution,
    draw,
    row_distributions,
)
from simspec.engine.tree import DraftTree, ShapedTree, Verification
from simspec.errors import SimspecError
from simspec.policies.base import (
    BatchPolicy,
    count_cache_hits,
    frontier_scores,
    overrides,
    sorted_levels,
    tree_capacities,
)


class SampledChain:
    """A chain (W = 1) sampled from the drafter's own q at the sampling temperature; ``q_rows``:
    each draft's q over the target's vocabulary, for the speculative-sampling rule."""

    def __init__(self, drafter: Drafter, sampling: Sampling, rng: np.random.Generator, vocab_size: int) -> None:
        self.sampling, self.rng, self.vocab_size = sampling, rng, vocab_size
        ids = drafter.draft_vocab
        self.ids = None if ids is None else ids.cpu().numpy()
        self.q_rows: list[np.ndarray] = []

    def __call__(self, logprobs: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        q_draft = distribution(logprobs[0], self.sampling)
        pick = draw(q_draft, self.rng)
        if self.ids is None:
            token, q = pick, q_draft
        else:  # a reduced draft vocabulary: q lives on its rows of the target's vocabulary
            token, q = int(self.ids[pick]), np.zeros(self.vocab_size)
            q[self.ids] = q_draft
        self.q_rows.append(q)
        return np.log(np.array([[q_draft[pick]]])), np.array([[token]])


@dataclass
class _Row:
    """The sequence a row decodes now."""

    index: int  # in the prompt list
    prompt: list[int]
    started: float
    root: int  # the last committed token, not yet run through the target
    unfed: int = 1  # tokens committed since the row last drafted: its next draft's first level feeds them
    prefill_s: float = 0.0
    seen: set[int] = field(default_factory=set)  # prompt and committed tokens (token-cache policies)
    tokens: list[int] = field(default_factory=list)
    cycles: list[CycleRecord] = field(default_factory=list)
    chain: SampledChain | None = None  # this cycle's sampled chain, if it drafts one


class SpeculativeEngine:
    """Decoding of ``target`` with ``drafter``, ``batch_size`` sequences at a time. The verifiers
    decide acceptance at T > 0 (replaceable: the statistical tests break them on purpose);
    ``runtime``: eager or compiled target forwards (``engine.runtime``)."""

    def __init__(self, target: LoadedModel, drafter: Drafter, sampling: Sampling = GREEDY,
                 tree_verifier: TreeVerifier | None = None, chain_verifier: ChainVerifier | None = None,
                 runtime: str = "eager", batch_size: int = 1) -> None:
        from simspec.engine.runtime import check_runtime

        if batch_size < 1:
            raise SimspecError(f"--batch-size must be >= 1, got {batch_size}")
        self.runtime = check_runtime(runtime)
        self.target, self.drafter, self.batch = target, drafter, batch_size
        self.sampling = sampling
        self.tree_verifier = tree_verifier or TreeVerifier()
        self.chain_verifier = chain_verifier or ChainVerifier()
        self.device = target.device
        self.eos = eos_token_ids(target)
        self.max_positions, self._limit = served_context(target.model.config)
        self.vocab_size = int(target.model.config.vocab_size)
        # slots past a sequence's tokens for a tree (None: TREE_SLOTS); warm_up narrows them to its
        # largest tree, as a compiled cache's attention reads them all (a larger tree grows it)
        self.tree_slots: int | None = None
        self._rngs: dict[int, np.random.Generator] = {}  # this run's generator per sequence (T > 0)

    @property
    def compile_s(self) -> float:
        """Seconds this process has spent compiling the target's forwards."""
        from simspec.engine.runtime import compiled_seconds

        return 0.0 if self.runtime == "eager" else compiled_seconds(self.target)

    def _capacity(self, longest_prompt: int, max_new_tokens: int, speculative: bool) -> int:
        """Cache slots per row for a queue whose longest prompt has ``longest_prompt`` tokens."""
        return longest_prompt + max_new_tokens + ((self.tree_slots or TREE_SLOTS) if speculative else 1)

    def warm_up(self, prompt_lengths: list[int], max_new_tokens: int, sizes: Sequence[int] = ()) -> float:
        """Under the compiled runtime, compile every forward that plain decoding and trees of these
        sizes meet on prompts of these lengths, so that no timed run pays a compile; the seconds."""
        if self.runtime == "eager":
            return 0.0
        from simspec.engine.runtime import bucket, capacity_bucket

        started = time.perf_counter()
        buckets = sorted({bucket(v) for v in sizes})
        if buckets:  # never narrowed by a later, smaller warm-up: the first capacities stay the runs'
            self.tree_slots = max(buckets[-1], self.tree_slots or 0)
        runs = [(False, None, [1])] + ([(True, self.drafter.target_layers(), buckets)] if buckets else [])
        with torch.inference_mode():
            for speculative, layers, sizes_run in runs:
                capacities = {capacity_bucket(self._capacity(n, max_new_tokens, speculative)) for n in prompt_lengths}
                for capacity in sorted(capacities):
                    rows = target_rows(self.target, self.batch, capacity, layers, self.runtime)
                    rows.prefill(0, torch.zeros(1, dtype=torch.long, device=self.device))
                    for size in sizes_run:
                        rows.forward({0: (np.zeros(size, dtype=np.int64), np.arange(size), causal(size))})
        return time.perf_counter() - started

    def check_length(self, prompt_ids: list[int], max_new_tokens: int) -> None:
        if not prompt_ids:
            raise SimspecError("empty prompt: nothing to decode from")
        if max_new_tokens < 1:
            raise SimspecError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if len(prompt_ids) + max_new_tokens > self.max_positions:
            raise SimspecError(
                f"prompt of {len(prompt_ids)} tokens + {max_new_tokens} new tokens exceeds the target's "
                f"{self._limit}: shorten the prompt or lower --max-new-tokens"
            )

    def _truncate(self, tokens: list[int], max_new_tokens: int) -> list[int]:
        tokens = tokens[:max_new_tokens]
        return tokens[:next((i + 1 for i, t in enumerate(tokens) if t in self.eos), len(tokens))]

    def _pick(self, logits: torch.Tensor, index: int) -> int:
        """The token after one position of sequence ``index``: the argmax, or its generator's draw."""
        rng = self._rngs.get(index)
        return int(logits.argmax(-1)) if rng is None else draw(distribution(logits.reshape(-1), self.sampling), rng)

    def generate(self, prompt_ids: list[int], policy: BatchPolicy, max_new_tokens: int,
                 seed: int | None = None) -> Generation:
        """Speculative decoding of one prompt; at T > 0 ``seed`` (default: the engine's) seeds its draws."""
        return self.decode([prompt_ids], policy, max_new_tokens, None if seed is None else [seed]).generations[0]

    def plain(self, prompt_ids: list[int], max_new_tokens: int, seed: int | None = None) -> Generation:
        """Plain decoding of one prompt in the engine's mode: greedy, or sampling at T > 0."""
        return self.decode([prompt_ids], None, max_new_tokens, None if seed is None else [seed]).generations[0]

    def greedy(self, prompt_ids: list[int], max_new_tokens: int) -> Generation:
        """Plain greedy decoding of one prompt, whatever the engine's sampling."""
        return self._decode([prompt_ids], None, max_new_tokens, None, sampled=False).generations[0]

    def sample(self, prompt_ids: list[int], max_new_tokens: int, seed: int | None = None) -> Generation:
        """Plain autoregressive sampling from the target at the engine's temperature / top-p."""
        if self.sampling.greedy:
            raise SimspecError("sample() needs a temperature > 0; greedy decoding is greedy()")
        return self.plain(prompt_ids, max_new_tokens, seed)

    def decode(self, prompts: list[list[int]], policy: BatchPolicy | None, max_new_tokens: int,
               seeds: Sequence[int] | None = None, arrivals: Sequence[float] | None = None) -> BatchRun:
        """Every prompt decoded, ``batch_size`` at a time: speculatively with ``policy``, or plainly
        (None); at T > 0 sequence i draws with ``seeds[i]``. ``arrivals``: request i takes a free row
        only ``arrivals[i]`` seconds (non-decreasing) into the run, in real time (a stream under load)."""
        return self._decode(prompts, policy, max_new_tokens, seeds, sampled=not self.sampling.greedy,
                            arrivals=arrivals)

    def _decode(self, prompts: list[list[int]], policy: BatchPolicy | None, max_new_tokens: int,
                seeds: Sequence[int] | None, sampled: bool, arrivals: Sequence[float] | None = None) -> BatchRun:
        if not prompts:
            raise SimspecError("no prompts to decode")
        for p in prompts:
            self.check_length(p, max_new_tokens)
        self._rngs, seeds = {}, list(seeds) if seeds is not None else None
        if sampled:
            seeds = seeds if seeds is not None else [self.sampling.seed + i for i in range(len(prompts))]
            if len(seeds) != len(prompts):
                raise SimspecError(f"{len(seeds)} seeds for {len(prompts)} prompts: one seed per prompt")
            self._rngs = {i: np.random.default_rng(seed) for i, seed in enumerate(seeds)}
        if policy is not None:
            if not isinstance(policy, BatchPolicy):
                raise SimspecError(f"policy {policy.name} has no batch methods (simspec.policies.base.BatchPolicy): "
                                   "the engine asks every row at once, as the simulator does")
            policy.batch_size, policy.waiting, policy.row_streams = self.batch, 0, None
            policy.reset_batch(len(prompts))  # a row per sequence: its index in the queue (its random stream's key)
        # Learned policies multiply small numpy matrices between the models' forwards.
        with torch.inference_mode(), (one_blas_thread() if policy is not None else nullcontext()):
            return self._run(prompts, policy, max_new_tokens, seeds if sampled else None, arrivals)

    def _run(self, prompts: list[list[int]], policy: BatchPolicy | None, max_new_tokens: int,
             seeds: list[int] | None, arrivals: Sequence[float] | None = None) -> BatchRun:
        speculative = policy is not None
        capacity = self._capacity(max(map(len, prompts)), max_new_tokens, speculative)
        drafter = batched(self.drafter, self.batch, capacity) if speculative else None
        layers = drafter.target_layers() if speculative and drafter.uses_target_hidden else None
        target = target_rows(self.target, self.batch, capacity, layers, self.runtime)
        queue = deque(enumerate(prompts))
        rows: list[_Row | None] = [None] * self.batch
        done: dict[int, Generation] = {}
        self._policy, self._policy_s, self._forwards = policy, 0.0, 0
        self._seconds = {"prefill": 0.0, "draft": 0.0, "verify": 0.0}
        self._log: list[BatchCycle] = []
        start = clock(self.device)
        cycles = idle = 0

        def admit_arrived() -> None:  # into free rows, in row order, the requests that have arrived
            for b in range(self.batch):
                if rows[b] is None and queue and (arrivals is None
                                                  or arrivals[queue[0][0]] <= clock(self.device) - start):
                    rows[b] = self._admit(target, drafter, b, *queue.popleft())

        admit_arrived()
        while any(r is not None for r in rows) or queue:
            if all(r is None for r in rows):  # every row free: wait for the next request
                time.sleep(max(0.0, arrivals[queue[0][0]] - (clock(self.device) - start)))
                admit_arrived()
                continue
            busy = sorted((b for b, r in enumerate(rows) if r is not None), key=lambda b: rows[b].index)
            if speculative and arrivals is not None:  # a load-aware policy sees the requests waiting for a row
                now = clock(self.device) - start
                policy.waiting = sum(1 for _ in takewhile(lambda q: arrivals[q[0]] <= now, queue))
            if speculative:
                self._cycle(target, drafter, rows, busy)
            else:
                self._plain_step(target, rows, busy)
            cycles += 1
            idle += self.batch - len(busy)
            for b in busy:
                row = rows[b]
                if len(row.tokens) < max_new_tokens and not any(t in self.eos for t in row.tokens):
                    continue
                done[row.index] = Generation(self._truncate(row.tokens, max_new_tokens), len(row.prompt),
                                             row.prefill_s, clock(self.device) - row.started, row.cycles,
                                             None if seeds is None else seeds[row.index], row.started - start)
                rows[b] = None
                target.release(b)  # padding until a request takes it, priced (and run) at the busy rows' context
                if speculative:
                    drafter.release(b)
            admit_arrived()
        s = self._seconds
        return BatchRun([done[i] for i in range(len(prompts))], self.batch, clock(self.device) - start, cycles, idle,
                        s["prefill"], s["draft"], s["verify"], self._forwards, self._policy_s, self._log)

    def _admit(self, target: TargetRows, drafter: RowDrafter | None, b: int, index: int, prompt: list[int]) -> _Row:
        """Row ``b`` starts the queue's sequence ``index``: its prefill, the first token, the drafter."""
        t = clock(self.device)
        ids = torch.tensor(prompt, device=self.device)
        hidden, features = target.prefill(b, ids)
        root = self._pick(head_logits(target.head, hidden[-1:]), index)
        row = _Row(index, prompt, t, root, tokens=[root])
        if drafter is not None:
            wants = drafter.uses_target_hidden
            drafter.reset_row(b, ids, features if wants else None)
            drafter.commit(b, torch.tensor([root], device=self.device), features[-1:] if wants else None)
            row.seen = {*prompt, root}
        row.prefill_s = clock(self.device) - t
        self._seconds["prefill"] += row.prefill_s
        return row

    def _plain_step(self, target: TargetRows, rows: list[_Row | None], busy: list[int],
                    drafter: RowDrafter | None = None, ids: np.ndarray | None = None, policy_s: float = 0.0) -> None:
        """One token per busy row. With ``drafter`` (a speculative cycle that drafted nothing) each
        token is committed to it and the policy observes a depth-1 cycle, as speculation switched off."""
        context = int(target.lengths[busy].max())
        t = clock(self.device)
        one = np.ones((1, 1), dtype=bool)
        hidden, features = target.forward({b: (np.array([rows[b].root]), np.zeros(1, dtype=np.int64), one)
                                           for b in busy})
        logits = head_logits(target.head, hidden[:, 0])
        nxt = logits.argmax(-1).cpu().numpy() if not self._rngs else \
            {b: self._pick(logits[b], rows[b].index) for b in busy}
        seconds = clock(self.device) - t
        ones = np.ones(len(busy), dtype=np.int64)
        self._seconds["verify"] += seconds
        hits = np.zeros(len(busy), dtype=np.int64)
        for i, b in enumerate(busy):
            target.keep(b, np.zeros(1, dtype=np.int64))
            row = rows[b]
            row.root = int(nxt[b])
            row.tokens.append(row.root)
            if drafter is not None:
                drafter.commit(b, torch.tensor([row.root], device=self.device),
                               features[b, :1] if drafter.uses_target_hidden else None)
                row.unfed += 1
                hits[i] = count_cache_hits(row.seen, [row.root], 0)
        if drafter is not None:
            t = clock(self.device)
            policy = self._policy
            policy.observe_batch(ids, ones, ones, ones * 0, **({"hits": hits} if policy.reads_cache else {}))
            policy_s += clock(self.device) - t
            self._policy_s += policy_s
        for b in busy:
            rows[b].cycles.append(CycleRecord(1, self._policy.width if drafter is not None else 1, 1, 0, 0, 0.0,
                                              seconds, policy_s, 0.0))
        self._log.append(BatchCycle(ones, ones, context, 1, 0.0, seconds, policy_s, 0.0))

    def _cycle(self, target: TargetRows, drafter: RowDrafter, rows: list[_Row | None], busy: list[int]) -> None:
        """One cycle of every busy row: plan, draft, size, verify, accept, trim."""
        device, policy = self.device, self._policy
        t_start = clock(device)
        lengths = target.lengths[busy]
        ids = np.array([rows[b].index for b in busy])
        t = clock(device)
        planned, sizes = policy.plan_batch(ids, lengths.copy())
        plan_s = clock(device) - t
        planned = np.maximum(np.asarray(planned, dtype=np.int64), 1)
        if planned.max() == 1:  # no row drafts: a plain step (sim.replay prices it as one)
            self._plain_step(target, rows, busy, drafter, ids, plan_s)
            return
        fed = max(rows[b].unfed for b, d in zip(busy, planned) if d > 1)
        trees, calls, depth, sizes, policy_s, draft_s = self._grow(drafter, rows, busy, lengths, ids, planned, sizes)
        policy_s += plan_s
        children = policy.children_batch(ids)
        verifications = {b: trees[b].verification(int(sizes[i]), None if children is None else int(children[i]))
                         for i, b in enumerate(busy)}
        t = clock(device)
        hidden, features = target.forward({b: (v.tokens, v.depths, v.visible) for b, v in verifications.items()})
        logits = head_logits(target.head, hidden.reshape(-1, hidden.shape[-1])).view(*hidden.shape[:2], -1)
        target_next = logits.argmax(-1).cpu().numpy() if not self._rngs else None
        verify_s = clock(device) - t

        drafter.end_cycle()
        accepted, hits = np.zeros(len(busy), dtype=np.int64), np.zeros(len(busy), dtype=np.int64)
        for i, b in enumerate(busy):
            v, row = verifications[b], rows[b]
            kept, bonus = self._accept(v, logits[b], target_next, b, row)
            target.keep(b, kept)
            new_tokens = v.tokens[kept].tolist()[1:] + [bonus]
            path = features[b, torch.as_tensor(kept, device=device)] if drafter.uses_target_hidden else None
            drafter.commit(b, torch.tensor(new_tokens, device=device), path)
            accepted[i] = len(kept) - 1
            hits[i] = count_cache_hits(row.seen, new_tokens, accepted[i])
            row.tokens.extend(new_tokens)
            row.root = new_tokens[-1]
            row.unfed = len(new_tokens) + (row.unfed if depth[i] == 1 else 0)
        size = np.array([len(verifications[b]) for b in busy])
        t = clock(device)
        policy.observe_batch(ids, depth, size, accepted, **({"hits": hits} if policy.reads_cache else {}))
        policy_s += clock(device) - t
        self._policy_s += policy_s
        self._seconds["draft"] += draft_s
        self._seconds["verify"] += verify_s
        rest = max(0.0, clock(device) - t_start - draft_s - verify_s - policy_s)
        for i, b in enumerate(busy):  # the batch's times, on every row's record
            rows[b].cycles.append(CycleRecord(
                depth=int(depth[i]), width=policy.width, size=int(size[i]), accepted=int(accepted[i]),
                draft_calls=calls[b], draft_s=draft_s, verify_s=verify_s, policy_s=policy_s,
                bookkeeping_s=rest))
        self._log.append(BatchCycle(depth, size, int(lengths.max()), fed, draft_s, verify_s, policy_s, rest))

    def _grow(self, drafter: RowDrafter, rows: list[_Row | None], busy: list[int], lengths: np.ndarray,
              ids: np.ndarray, planned: np.ndarray, sizes) -> tuple:
        """Every busy row's tree as ``planned``, drafted and sized: the trees, draft calls, depths and sizes
        per row, the seconds in the policy and drafting."""
        device, policy = self.device, self._policy
        policy_s = 0.0
        # positions must stay inside the model's context; a tree never needs more levels than that
        caps = np.maximum(1, np.minimum(planned, self.max_positions - lengths))
        width, shape = policy.width, policy.shape
        trees = {b: DraftTree(rows[b].root, int(caps[i]), width) if shape is None else
                 ShapedTree(rows[b].root, int(caps[i]), shape) for i, b in enumerate(busy)}
        chains = self._rngs and width == 1 and self.drafter.samples_chains
        for b in busy:
            rows[b].chain = SampledChain(self.drafter, self.sampling, self._rngs[rows[b].index], self.vocab_size) \
                if chains else None
        calls, draft_s, decide_s = self._draft(drafter, trees, rows, busy, ids, caps)
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
        return trees, calls, depth, sizes, policy_s, draft_s

    def _accept(self, v: Verification, logits: torch.Tensor, target_next: np.ndarray | None, b: int, row: _Row
                ) -> tuple[np.ndarray, int]:
        """Row ``b``'s accepted rows (root first) and the token after them: the greedy path, or at
        T > 0 the walk over its tree (or chain) with the sequence's generator."""
        if target_next is not None:
            return v.accept(target_next[b, : len(v)])
        probs_of, rng = row_distributions(logits, self.sampling), self._rngs[row.index]
        if row.chain is not None:  # a chain's verified rows are its first V nodes, in order
            return self.chain_verifier.accept(v.tokens, row.chain.q_rows, probs_of, rng)
        return self.tree_verifier.accept(v.tokens, v.parent_rows, probs_of, rng)

    def _draft(self, drafter: RowDrafter, trees: dict[int, DraftTree], rows: list[_Row | None], busy: list[int],
               ids: np.ndarray, caps: np.ndarray) -> tuple[dict[int, int], float, float]:
        """Every row's tree, level by level, one forward per level; after each the policy decides
        CONTINUE / STOP for the rows that could go on in one call (``keep_drafting_batch``, as
        replay asks it). Draft calls per row, the seconds drafting and the seconds deciding."""
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
            children = [rows[b].chain(lp) if rows[b].chain is not None else
                        drafter.top_candidates(lp, trees[b].width) for b, lp in zip(drafting, logprobs)]
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
