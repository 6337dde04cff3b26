"""The real tree speculative-decoding engine, and plain greedy decoding through the same code.

One cycle reads like the algorithm:

    plan      = policy.plan(...)                      # (D, W, V) budget
    draft     : root step, then level by level while the policy says CONTINUE
    size      = policy.choose_size(tree)
    verify    : the best ``size`` nodes, one target forward with a tree mask
    accept    : longest path agreeing with the target's greedy tokens, plus its bonus token
                (at temperature > 0: ``simspec.engine.sampling``'s rejection walk)
    trim      : keep only the accepted tokens in the target's and the drafter's caches

For greedy decoding the output equals ``greedy()`` token for token, whatever the policy or
the drafter; only floating-point reordering in the batched forward could flip an exact
near-tie, which ``simspec.engine.lossless`` reports with the target's top-2 logit gap. At
temperature > 0 the output's distribution equals ``sample()``'s (plain sampling).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from simspec.blas import one_blas_thread
from simspec.engine.context import served_context
from simspec.engine.drafter import Drafter
from simspec.engine.kv_slots import TREE_SLOTS
from simspec.engine.modeling import head_logits
from simspec.engine.models import LoadedModel, eos_token_ids
from simspec.engine.sampling import (
    GREEDY,
    ChainVerifier,
    Sampling,
    TreeVerifier,
    distribution,
    draw,
    row_distributions,
)
from simspec.engine.target_cache import TargetCache, target_cache
from simspec.engine.tree import DraftTree, ShapedTree
from simspec.errors import SimspecError
from simspec.policies.base import BuiltTree, CycleOutcome, CycleStart, DraftStep, Policy


def clock(device: torch.device) -> float:
    """Wall-clock seconds, after the device has finished its queued work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


@dataclass(frozen=True)
class CycleRecord:
    """One draft-and-verify cycle. Times in seconds; bookkeeping = all but model forwards
    and policy calls (tree growth, selection, masks, acceptance, cache trimming)."""

    depth: int  # levels drafted, root included (1: nothing drafted)
    width: int
    size: int  # tokens in the target's forward (root included)
    accepted: int  # draft tokens accepted; the cycle emits accepted + 1 tokens
    draft_calls: int
    draft_s: float
    verify_s: float
    policy_s: float
    bookkeeping_s: float


@dataclass
class Generation:
    """A finished generation: the new tokens and what every cycle did."""

    tokens: list[int]
    prompt_length: int
    prefill_s: float
    total_s: float  # prefill included
    cycles: list[CycleRecord] = field(default_factory=list)
    seed: int | None = None  # the generator's seed (None: greedy decoding)

    @property
    def tau(self) -> float:
        """Mean tokens emitted per cycle (accepted drafts + the bonus token)."""
        return float(np.mean([c.accepted + 1 for c in self.cycles])) if self.cycles else 1.0

    def time_shares(self) -> dict[str, float]:
        """Share of total time spent drafting, verifying, in the policy, in bookkeeping, in prefill."""
        parts = {
            "draft": sum(c.draft_s for c in self.cycles),
            "verify": sum(c.verify_s for c in self.cycles),
            "policy": sum(c.policy_s for c in self.cycles),
            "bookkeeping": sum(c.bookkeeping_s for c in self.cycles),
            "prefill": self.prefill_s,
        }
        return {k: v / self.total_s for k, v in parts.items()}


def draft_tree(drafter: Drafter, tree: DraftTree, depth_cap: int, device: torch.device,
               keep_drafting: Callable[[np.ndarray], bool] | None = None,
               children: Callable[[torch.Tensor], tuple[np.ndarray, np.ndarray]] | None = None
               ) -> tuple[int, float, float]:
    """Grow ``tree`` level by level up to ``depth_cap`` levels, asking ``keep_drafting(new
    level's scores)`` after every level but the last. ``children(logprobs)`` picks each
    frontier node's children as (log-probs, target ids) arrays: the drafter's top W by default
    (``SampledChain`` draws them instead). The engine's cycle and the trace recorder both build
    trees here, so recorded and live trees are the same trees.
    Returns (draft calls, seconds drafting, seconds in ``keep_drafting``)."""
    children = children or (lambda logprobs: drafter.top_candidates(logprobs, tree.width))
    draft_calls, draft_s, decide_s = 0, 0.0, 0.0
    while tree.levels < depth_cap:
        t = clock(device)
        if draft_calls == 0:
            logprobs = drafter.draft_root()[None]
        else:
            frontier, depth, visible = tree.feed_frontier()
            logprobs = drafter.draft_level(
                torch.as_tensor(frontier, device=device), depth, torch.as_tensor(visible, device=device)
            )
        top_logprobs, top_tokens = children(logprobs)
        draft_s += clock(device) - t
        draft_calls += 1
        level_scores = tree.grow(top_logprobs, top_tokens)
        if tree.levels >= depth_cap or keep_drafting is None:
            continue
        t = clock(device)
        go_on = keep_drafting(level_scores)
        decide_s += clock(device) - t
        if not go_on:
            break
    return draft_calls, draft_s, decide_s


class SampledChain:
    """Children for a chain (W = 1) *sampled* from the drafter's own distribution q at the
    sampling temperature, what the standard speculative-sampling rule verifies; keeps each
    draft's q over the target's vocabulary in ``q_rows``."""

    def __init__(self, drafter: Drafter, sampling: Sampling, rng: np.random.Generator, vocab_size: int) -> None:
        self.drafter, self.sampling, self.rng, self.vocab_size = drafter, sampling, rng, vocab_size
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


class SpeculativeEngine:
    """Tree speculative decoding of ``target`` with ``drafter``: greedy, or sampling at
    ``sampling.temperature`` > 0. ``tree_verifier`` / ``chain_verifier`` decide acceptance at
    T > 0 (replaceable: the statistical tests show their power on deliberately broken ones).
    ``runtime``: how the target's forwards run (``engine.runtime``: eager or compiled)."""

    def __init__(self, target: LoadedModel, drafter: Drafter, sampling: Sampling = GREEDY,
                 tree_verifier: TreeVerifier | None = None, chain_verifier: ChainVerifier | None = None,
                 runtime: str = "eager") -> None:
        from simspec.engine.runtime import check_runtime

        self.runtime = check_runtime(runtime)
        # slots past the new tokens for a tree (None: TREE_SLOTS): a compiled cache's attention
        # reads them all, so warm_up narrows them to the largest tree it compiles for (a larger
        # one still fits: the cache grows)
        self.tree_slots: int | None = None
        self.target = target
        self.drafter = drafter
        self.sampling = sampling
        self.tree_verifier = tree_verifier or TreeVerifier()
        self.chain_verifier = chain_verifier or ChainVerifier()
        self.device = target.device
        self.eos = eos_token_ids(target)
        self.max_positions, self._limit = served_context(target.model.config)
        self.vocab_size = int(target.model.config.vocab_size)

    @property
    def compile_s(self) -> float:
        """Seconds this process has spent compiling the target's forwards (0 when eager)."""
        from simspec.engine.runtime import compiled_seconds

        return 0.0 if self.runtime == "eager" else compiled_seconds(self.target)

    def warm_up(self, prompt_lengths: list[int], max_new_tokens: int, sizes: Sequence[int] = ()) -> float:
        """Under the compiled runtime, compile every target forward that plain decoding and trees
        of these sizes (nodes verified) meet on prompts of these lengths, so that no timed run
        pays a compile; returns the seconds it took (0 when eager). A tree larger than every one
        of ``sizes`` still decodes (its cache grows, compiling then)."""
        if self.runtime == "eager":
            return 0.0
        from simspec.engine.runtime import bucket, capacity_bucket
        from simspec.engine.target_cache import warm_compiled

        started = time.perf_counter()
        for n in sorted({capacity_bucket(n + max_new_tokens + 1) for n in prompt_lengths}):
            warm_compiled(self.target, None, n, [1])
        if sizes:
            buckets = sorted({bucket(v) for v in sizes})
            # never narrowed by a later, smaller warm-up (validate --recalibrate's refit after the
            # scored runs' warm-up): the capacities compiled first must stay the ones runs use
            self.tree_slots = max(buckets[-1], self.tree_slots or 0)
            for n in sorted({capacity_bucket(n + max_new_tokens + self.tree_slots) for n in prompt_lengths}):
                warm_compiled(self.target, self.drafter.target_layers(), n, buckets)
        return time.perf_counter() - started

    # -- shared pieces -----------------------------------------------------------------
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

    def _generator(self, seed: int | None) -> tuple[np.random.Generator | None, int | None]:
        if self.sampling.greedy:
            return None, None
        seed = self.sampling.seed if seed is None else seed
        return np.random.default_rng(seed), seed

    def _next_token(self, logits: torch.Tensor, rng: np.random.Generator | None) -> int:
        """The token after one position: the argmax, or a draw from the target's distribution."""
        if rng is None:
            return int(logits.argmax(-1))
        return draw(distribution(logits.reshape(-1), self.sampling), rng)

    def _prefill(self, target: TargetCache, prompt: torch.Tensor, rng: np.random.Generator | None = None
                 ) -> tuple[torch.Tensor, int]:
        hidden = target.forward(prompt)
        target.length = len(prompt)
        return hidden, self._next_token(head_logits(target.head, hidden[-1:]), rng)

    def _truncate(self, tokens: list[int], max_new_tokens: int) -> list[int]:
        tokens = tokens[:max_new_tokens]
        for i, t in enumerate(tokens):
            if t in self.eos:
                return tokens[: i + 1]
        return tokens

    # -- plain decoding: the speedup baseline and the lossless reference -------------------
    def plain(self, prompt_ids: list[int], max_new_tokens: int, seed: int | None = None) -> Generation:
        """Plain decoding in the engine's mode: ``greedy()``, or ``sample()`` at T > 0."""
        if self.sampling.greedy:
            return self.greedy(prompt_ids, max_new_tokens)
        return self.sample(prompt_ids, max_new_tokens, seed)

    def greedy(self, prompt_ids: list[int], max_new_tokens: int) -> Generation:
        return self._plain(prompt_ids, max_new_tokens, None, None)

    def sample(self, prompt_ids: list[int], max_new_tokens: int, seed: int | None = None) -> Generation:
        """Plain autoregressive sampling from the target at the engine's temperature / top-p."""
        if self.sampling.greedy:
            raise SimspecError("sample() needs a temperature > 0; greedy decoding is greedy()")
        rng, seed = self._generator(seed)
        return self._plain(prompt_ids, max_new_tokens, rng, seed)

    @torch.inference_mode()
    def _plain(self, prompt_ids: list[int], max_new_tokens: int, rng: np.random.Generator | None,
               seed: int | None) -> Generation:
        self.check_length(prompt_ids, max_new_tokens)
        start = clock(self.device)
        target = target_cache(self.target, None, len(prompt_ids) + max_new_tokens + 1, self.runtime)
        _, token = self._prefill(target, torch.tensor(prompt_ids, device=self.device), rng)
        prefill_s = clock(self.device) - start
        tokens = [token]
        cycles = []
        while len(tokens) < max_new_tokens and token not in self.eos:
            t0 = clock(self.device)
            hidden = target.forward(torch.tensor([token], device=self.device))
            target.length += 1
            token = self._next_token(head_logits(target.head, hidden), rng)
            t1 = clock(self.device)
            tokens.append(token)
            cycles.append(CycleRecord(1, 1, 1, 0, 0, 0.0, t1 - t0, 0.0, 0.0))
        return Generation(tokens, len(prompt_ids), prefill_s, clock(self.device) - start, cycles, seed)

    # -- speculative decoding --------------------------------------------------------------
    @torch.inference_mode()
    def generate(self, prompt_ids: list[int], policy: Policy, max_new_tokens: int,
                 seed: int | None = None) -> Generation:
        """Speculative decoding of one prompt; at T > 0 ``seed`` (default: the engine's) seeds
        the generator every draw comes from."""
        # Learned policies multiply small numpy matrices between the models' forwards.
        with one_blas_thread():
            return self._generate(prompt_ids, policy, max_new_tokens, *self._generator(seed))

    def _generate(self, prompt_ids: list[int], policy: Policy, max_new_tokens: int,
                  rng: np.random.Generator | None, seed: int | None) -> Generation:
        self.check_length(prompt_ids, max_new_tokens)
        start = clock(self.device)
        wants_hidden = self.drafter.uses_target_hidden
        target = target_cache(self.target, self.drafter.target_layers(),
                              len(prompt_ids) + max_new_tokens + (self.tree_slots or TREE_SLOTS), self.runtime)
        prompt = torch.tensor(prompt_ids, device=self.device)
        _, root = self._prefill(target, prompt, rng)
        features = target.features
        self.drafter.reset(prompt, features if wants_hidden else None)
        self.drafter.commit(torch.tensor([root], device=self.device), features[-1:] if wants_hidden else None)
        policy.reset()
        policy.see_context([*prompt_ids, root])
        prefill_s = clock(self.device) - start
        tokens = [root]
        cycles: list[CycleRecord] = []
        while len(tokens) < max_new_tokens and root not in self.eos:
            record, new_tokens = self._cycle(target, root, policy, len(cycles), rng)
            cycles.append(record)
            tokens.extend(new_tokens)
            root = new_tokens[-1]
            if any(t in self.eos for t in new_tokens):
                break
        return Generation(self._truncate(tokens, max_new_tokens), len(prompt_ids), prefill_s,
                          clock(self.device) - start, cycles, seed)

    def _cycle(self, target: TargetCache, root: int, policy: Policy, index: int,
               rng: np.random.Generator | None = None) -> tuple[CycleRecord, list[int]]:
        device, drafter = self.device, self.drafter
        t_start = clock(device)
        t = clock(device)
        plan = policy.plan(CycleStart(cycle=index, context_length=target.length))
        policy_s = clock(device) - t
        # Positions must stay inside the model's context; a tree never needs more levels than that.
        depth_cap = max(1, min(plan.depth, self.max_positions - target.length))
        tree = DraftTree(root, depth_cap, plan.width) if plan.shape is None else ShapedTree(root, depth_cap, plan.shape)

        def keep_drafting(level_scores: np.ndarray) -> bool:
            return policy.keep_drafting(DraftStep(tree.levels, plan.width, target.length, lambda: level_scores), plan)

        chain = (SampledChain(drafter, self.sampling, rng, self.vocab_size)
                 if rng is not None and plan.width == 1 and drafter.samples_chains else None)
        draft_calls, draft_s, policy_s_drafting = draft_tree(drafter, tree, depth_cap, device, keep_drafting, chain)
        policy_s += policy_s_drafting

        t = clock(device)
        size = policy.choose_size(
            BuiltTree(tree.levels, plan.width, target.length, tree.n, lambda: tree.scores[: tree.n]), plan
        )
        policy_s += clock(device) - t
        verification = tree.verification(max(1, int(size)))

        t = clock(device)
        hidden = target.forward(
            torch.as_tensor(verification.tokens, device=device), verification.depths, verification.visible
        )
        if rng is None:
            target_next = head_logits(target.head, hidden).argmax(-1).cpu().numpy()
            verify_s = clock(device) - t
            rows, bonus = verification.accept(target_next)
        else:
            logits = head_logits(target.head, hidden)
            verify_s = clock(device) - t
            probs_of = row_distributions(logits, self.sampling)
            if chain is not None:  # a chain's verified rows are its first V nodes, in order
                rows, bonus = self.chain_verifier.accept(verification.tokens, chain.q_rows, probs_of, rng)
            else:
                rows, bonus = self.tree_verifier.accept(verification.tokens, verification.parent_rows, probs_of, rng)
        target.keep(rows, len(verification))
        drafter.end_cycle()
        accepted_tokens = verification.tokens[rows].tolist()  # root first
        new_tokens = accepted_tokens[1:] + [bonus]
        path_hidden = target.features[torch.as_tensor(rows, device=device)] if drafter.uses_target_hidden else None
        drafter.commit(torch.tensor(new_tokens, device=device), path_hidden)

        t = clock(device)
        policy.observe(CycleOutcome(plan=plan, depth=tree.levels, size=len(verification), accepted=len(rows) - 1,
                                    tokens=tuple(new_tokens)))
        policy_s += clock(device) - t
        total = clock(device) - t_start
        record = CycleRecord(
            depth=tree.levels,
            width=plan.width,
            size=len(verification),
            accepted=len(rows) - 1,
            draft_calls=draft_calls,
            draft_s=draft_s,
            verify_s=verify_s,
            policy_s=policy_s,
            bookkeeping_s=max(0.0, total - draft_s - verify_s - policy_s),
        )
        return record, new_tokens

