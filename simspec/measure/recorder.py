"""Recording draft-tree traces (the format is ``simspec.sim.traces``): per prompt the target's
greedy continuation (batched, then checked against one unbatched forward), and at every position
the tree the drafter builds with the engine's own tree code, so that recorded and live trees are
the same, and the greedy path walked as a chain (``path_child_ranks``). At T > 0 the continuation
is sampled and each tree's verifiable nodes get the target's probabilities (``stored_nodes``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from simspec.engine.batch_models import TargetRows
from simspec.engine.drafter import Drafter
from simspec.engine.greedy import greedy_continuations
from simspec.engine.modeling import head_logits
from simspec.engine.models import LoadedModel, eos_token_ids
from simspec.engine.sampling import GREEDY, Sampling, distribution, draw
from simspec.engine.speculative import SpeculativeEngine
from simspec.engine.tree import DraftTree
from simspec.policies import StaticPolicy
from simspec.sim.stochastic import stored_nodes
from simspec.sim.traces import NO_NODE, RANK_CAP, PromptTrace, TraceSet, accepted_lengths, pad_node_rows

CONTINUATION_BATCH = 16  # prompts per batched greedy generation (shards keep these groups whole)


@dataclass(frozen=True)
class RecordSpec:
    depth_max: int = 12
    width: int = 10
    max_new_tokens: int = 128
    sampling: Sampling = GREEDY
    nodes: int = 64  # at T > 0: the largest V replay may verify (root included)


def draft_tree(drafter: Drafter, tree: DraftTree, depth_cap: int, device: torch.device,
               children: Callable[[torch.Tensor], tuple[np.ndarray, np.ndarray]] | None = None) -> None:
    """Grows ``tree`` to ``depth_cap`` levels as the engine's cycle does (``children``: default top W)."""
    children = children or (lambda logprobs: drafter.top_candidates(logprobs, tree.width))
    first = True
    while tree.levels < depth_cap:
        if first:
            logprobs = drafter.draft_root()[None]
        else:
            frontier, depth, visible = tree.feed_frontier()
            logprobs = drafter.draft_level(torch.as_tensor(frontier, device=device), depth,
                                           torch.as_tensor(visible, device=device))
        first = False
        tree.grow(*children(logprobs))


def tree_tables(tree: DraftTree, greedy_after_root: np.ndarray, depth_max: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``path_rank``, ``level_scores`` and ``best_child_logprobs`` (``simspec.sim.traces``) of one full
    tree; ``greedy_after_root[k]``: the target's greedy token k+1 steps after the root (the path
    ends where it does)."""
    n, width = tree.n, tree.width
    scores, depths = tree.scores[:n], tree.depths[:n]
    on_path = np.zeros(n, dtype=bool)
    on_path[0] = True
    path_nodes = []
    for level in range(1, depth_max):
        nodes = np.flatnonzero(depths == level)
        if level > len(greedy_after_root) or len(nodes) == 0:
            break
        hit = nodes[on_path[tree.parents[nodes]] & (tree.tokens[nodes] == greedy_after_root[level - 1])]
        if len(hit) == 0:
            break
        on_path[hit[0]] = True
        path_nodes.append(int(hit[0]))
    levels = depth_max - 1
    path_rank = np.full((levels, levels), NO_NODE, dtype=np.int16)
    # Nodes of depth < D are the first level_end[D] nodes (the tree is stored level by level).
    level_end = np.searchsorted(depths, np.arange(2, depth_max + 1))
    rest = scores[1:]
    for j, node in enumerate(path_nodes, start=1):
        s = scores[node]
        # Rank in a stable sort by descending score: strictly better nodes, then equal ones created earlier.
        before = np.cumsum((rest > s) | ((rest == s) & (np.arange(1, n) < node)))
        for d in range(j + 1, depth_max + 1):  # trees of d levels contain depth j iff j < d
            path_rank[j - 1, d - 2] = before[level_end[d - 2] - 2]
    level_scores = np.full((levels, width * width), -np.inf, dtype=np.float16)
    best_children = np.full((levels, width), -np.inf, dtype=np.float16)
    best = 0  # the root, then each level's best node
    for level in range(1, depth_max):
        at_level = np.flatnonzero(depths == level)
        row = np.sort(scores[at_level])[::-1]
        level_scores[level - 1, : len(row)] = row
        children = at_level[tree.parents[at_level] == best]
        best_children[level - 1, : len(children)] = np.sort(scores[children] - scores[best])[::-1]
        if len(at_level):
            best = int(at_level[np.argmax(scores[at_level])])
    return path_rank, level_scores, best_children


def path_child_ranks(drafter: Drafter, root_logprobs: torch.Tensor, path: np.ndarray, levels: int,
                     device: torch.device) -> np.ndarray:
    """One position's ``child_rank`` row (``simspec.sim.traces``): the drafter fed a chain forced along
    ``path`` from the root's children (``root_logprobs``), each token's rank among its parent's best
    ``RANK_CAP`` children, up to the first that is not among them; then the cycle ends."""
    ranks = np.full(levels, -1, dtype=np.int16)
    logprobs = root_logprobs.reshape(1, -1)
    for j in range(min(levels, len(path))):
        _, top_ids = drafter.top_candidates(logprobs, min(RANK_CAP, logprobs.shape[-1]))
        hit = np.flatnonzero(top_ids[0] == path[j])
        ranks[j] = hit[0] if len(hit) else NO_NODE
        if not len(hit) or j + 1 == min(levels, len(path)):
            break
        # the path's depth-(j+1) node, seeing the chain fed before it and itself
        logprobs = drafter.draft_level(torch.tensor([int(path[j])], device=device), j + 1,
                                       torch.ones((1, j + 1), dtype=torch.bool, device=device))
    drafter.end_cycle()
    return ranks


class TraceRecorder:
    def __init__(self, target: LoadedModel, drafter: Drafter, spec: RecordSpec) -> None:
        self.target, self.drafter, self.spec = target, drafter, spec
        self.device, self.eos = target.device, eos_token_ids(target)

    def continuations(self, prompts: list[list[int]], advance: Callable[[int], None] = lambda n: None
                      ) -> list[list[int]]:
        """Batched greedy continuations, ``max_new_tokens + depth_max`` tokens (the path below every root)."""
        new = self.spec.max_new_tokens + self.spec.depth_max
        full = greedy_continuations(self.target, prompts, new, batch=CONTINUATION_BATCH, advance=advance)
        return [seq[len(p):] for seq, p in zip(full, prompts)]

    def record_all(self, prompts: list[list[int]], bar: Callable[[str, int], Callable[[], None]],
                   index: list[int] | None = None) -> list[PromptTrace]:
        """Every prompt's trace (at T > 0 prompt n with seed + n; ``index``: the prompts' places, for a shard)."""
        index = list(range(len(prompts))) if index is None else index
        sampled = not self.spec.sampling.greedy
        continuations = [] if sampled else self.continuations(prompts, bar("greedy continuations", len(prompts)))
        tick = bar("recording sampled trees" if sampled else "recording trees", len(prompts))
        recorded = []
        for k, (n, ids) in enumerate(zip(index, prompts)):
            recorded.append(self.record_sampled(ids, np.random.default_rng(self.spec.sampling.seed + n)) if sampled
                            else self.record(ids, continuations[k]))
            tick()
        return recorded

    @torch.inference_mode()
    def record(self, prompt_ids: list[int], continuation: list[int]) -> PromptTrace:
        spec, device, drafter = self.spec, self.device, self.drafter
        sequence = torch.tensor(prompt_ids + continuation, device=device)
        rows = TargetRows(self.target, 1, len(sequence), drafter.target_layers())
        hidden, features = rows.prefill(0, sequence)
        checked = head_logits(rows.head, hidden[len(prompt_ids) - 1:-1]).argmax(-1).cpu().numpy()
        cont = np.asarray(continuation, dtype=np.int64)
        disagree = np.flatnonzero(checked != cont)
        # Batched and unbatched arithmetic can split a near-tie differently; keep the agreed prefix.
        cut = int(disagree[0]) if len(disagree) else len(cont)
        cont = cont[:cut]
        eos_at = np.flatnonzero(np.isin(cont, list(self.eos)))
        if len(eos_at):
            cont = cont[: eos_at[0] + 1]
        # Cycles happen while fewer than max_new_tokens are out and the root is not EOS.
        n_positions = max(0, min(spec.max_new_tokens - 1, len(cont) - (1 if len(eos_at) else 0), len(cont)))
        levels = spec.depth_max - 1
        path_rank = np.empty((n_positions, levels, levels), dtype=np.int16)
        level_scores = np.empty((n_positions, levels, spec.width ** 2), dtype=np.float16)
        best_children = np.empty((n_positions, levels, spec.width), dtype=np.float16)
        child_rank = np.empty((n_positions, levels), dtype=np.int16)
        for p in self._advance(sequence, features, len(prompt_ids), n_positions):
            tree = DraftTree(int(cont[p]), spec.depth_max, spec.width)
            root = []  # the root step's log-probs, which the greedy path's chain starts from

            def children(logprobs: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
                if not root:
                    root.append(logprobs[0])
                return drafter.top_candidates(logprobs, spec.width)

            draft_tree(drafter, tree, spec.depth_max, device, children=children)
            path_rank[p], level_scores[p], best_children[p] = tree_tables(tree, cont[p + 1:p + spec.depth_max],
                                                                          spec.depth_max)
            drafter.end_cycle()
            child_rank[p] = path_child_ranks(drafter, root[0], cont[p + 1:p + spec.depth_max], levels, device)
        return PromptTrace(cont, len(prompt_ids) + np.arange(n_positions, dtype=np.int32), path_rank, level_scores,
                           best_children, bool(len(disagree)), child_rank=child_rank)

    def _advance(self, sequence: torch.Tensor, features: torch.Tensor, base: int, n_positions: int):
        """Resets the drafter on the prompt, then yields each position after committing its root (nothing accepted)."""
        drafter, wants_hidden = self.drafter, self.drafter.uses_target_hidden
        drafter.reset(sequence[:base], features[:base] if wants_hidden else None)
        for p in range(n_positions):
            drafter.commit(sequence[base + p: base + p + 1], features[base + p - 1: base + p] if wants_hidden else None)
            yield p

    @torch.inference_mode()
    def child_ranks(self, prompt_ids: list[int], continuation: np.ndarray, n_positions: int) -> np.ndarray:
        """``child_rank`` for traces recorded without it, the drafter advanced exactly as ``record`` advances it."""
        levels, device, drafter = self.spec.depth_max - 1, self.device, self.drafter
        cont = np.asarray(continuation, dtype=np.int64)
        sequence = torch.tensor(list(prompt_ids) + cont.tolist(), device=device)
        _, features = TargetRows(self.target, 1, len(sequence), drafter.target_layers()).prefill(0, sequence)
        out = np.empty((n_positions, levels), dtype=np.int16)
        for p in self._advance(sequence, features, len(prompt_ids), n_positions):
            out[p] = path_child_ranks(drafter, drafter.draft_root(), cont[p + 1:p + self.spec.depth_max], levels,
                                      device)
        return out

    @torch.inference_mode()
    def record_sampled(self, prompt_ids: list[int], rng: np.random.Generator) -> PromptTrace:
        """One prompt at T > 0: a continuation sampled with ``rng``, each position's tree and stored nodes."""
        spec, device, drafter, sampling = self.spec, self.device, self.drafter, self.spec.sampling
        wants_hidden = drafter.uses_target_hidden
        target = TargetRows(self.target, 1, len(prompt_ids) + spec.max_new_tokens + spec.nodes, drafter.target_layers())
        prompt = torch.tensor(prompt_ids, device=device)
        hidden, features = target.prefill(0, prompt)
        root = draw(distribution(head_logits(target.head, hidden[-1:])[0], sampling), rng)
        drafter.reset(prompt, features if wants_hidden else None)
        feature = features[-1:] if wants_hidden else None
        levels, width = spec.depth_max - 1, spec.width
        tokens = [root]
        level_rows, best_rows, depth_rows, parent_rows, prob_rows, token_rows = [], [], [], [], [], []
        while len(tokens) < spec.max_new_tokens and root not in self.eos:
            drafter.commit(torch.tensor([root], device=device), feature)
            tree = DraftTree(root, spec.depth_max, width)
            draft_tree(drafter, tree, spec.depth_max, device)
            drafter.end_cycle()
            _, scores, best = tree_tables(tree, np.zeros(0, dtype=np.int64), spec.depth_max)
            level_rows.append(scores)
            best_rows.append(best)
            stored = stored_nodes(tree.scores[:tree.n], tree.depths[:tree.n], spec.depth_max, spec.nodes)
            column = np.full(tree.n, -1, dtype=np.int64)
            column[stored] = np.arange(len(stored))
            parents = np.where(stored == 0, -1, column[tree.parents[stored]])
            # One tree-masked forward over the root and every stored node with a stored child.
            fed = np.sort(np.union1d([0], tree.parents[stored[1:]]))
            block = (tree.tokens[fed], tree.depths[fed], tree.ancestors[np.ix_(fed, fed)])
            hidden, features = target.forward({0: block})
            probs = distribution(head_logits(target.head, hidden[0]), sampling)  # [len(fed), vocab]
            row_of = np.searchsorted(fed, tree.parents[stored[1:]])
            prob = np.zeros(len(stored), dtype=np.float32)
            prob[1:] = probs[row_of, tree.tokens[stored[1:]]]
            depth_rows.append(tree.depths[stored].astype(np.int8))
            parent_rows.append(parents.astype(np.int16))
            prob_rows.append(prob)
            token_rows.append(tree.tokens[stored].astype(np.int32))
            feature = features[0, :1] if wants_hidden else None
            target.keep(0, np.zeros(1, dtype=np.int64))  # the root joins the context
            root = draw(probs[0], rng)
            tokens.append(root)
        n = len(level_rows)
        nodes = pad_node_rows(list(zip(depth_rows, parent_rows, prob_rows, token_rows)))
        return PromptTrace(np.asarray(tokens, dtype=np.int64), len(prompt_ids) + np.arange(n, dtype=np.int32),
                           np.full((n, levels, levels), NO_NODE, dtype=np.int16),
                           np.asarray(level_rows, dtype=np.float16).reshape(n, levels, width ** 2),
                           np.asarray(best_rows, dtype=np.float16).reshape(n, levels, width), False,
                           **nodes)


@dataclass(frozen=True)
class ReplayCheck:
    config: tuple[int, int, int]  # (D, W, V)
    cycles: int
    matches: int
    first_mismatch: dict | None

    def to_dict(self) -> dict:
        return {"depth": self.config[0], "width": self.config[1], "size": self.config[2], "cycles": self.cycles,
                "matches": self.matches, "first_mismatch": self.first_mismatch}


def replay_check(engine: SpeculativeEngine, traces: TraceSet, prompts: list[list[int]], configs: list[tuple[int, int]],
                 max_new_tokens: int, advance: Callable[[], None] = lambda: None) -> list[ReplayCheck]:
    """Each static (D, V) on the live engine, every cycle's accepted length against the trace's prediction."""
    results = []
    for depth, size in configs:
        cycles = matches = 0
        first = None
        for i, ids in enumerate(prompts):
            rows = traces.prompt_positions(i)
            ranks = traces.path_rank[rows]
            generation = engine.generate(ids, StaticPolicy(depth, traces.width, size), max_new_tokens)
            position = 0
            for c in generation.cycles:
                if position >= len(ranks):
                    break
                predicted = int(accepted_lengths(ranks[position:position + 1], depth, size)[0])
                cycles += 1
                if predicted == c.accepted:
                    matches += 1
                elif first is None:
                    first = {"prompt": traces.meta.prompt_ids[i], "position": position,
                             "live": c.accepted, "trace": predicted}
                position += c.accepted + 1
            advance()
        results.append(ReplayCheck((depth, traces.width, size), cycles, matches, first))
    return results
