"""Drafters: the small models that propose the tree the target verifies.

One interface, driven by the engine, so any drafter slots in without touching the cycle:

    reset(prompt, prompt_hidden)    a new sequence (the prompt is context, nothing to draft yet)
    commit(tokens, hidden)          tokens the target accepted (the last one is the next root);
                                    ``hidden[j]`` is the target's last hidden state at the token
                                    *before* ``tokens[j]`` (what an EAGLE-style head reads)
    draft_root()                    log-probs of the root's children            -> [vocab]
    draft_level(tokens, depth, visible)
                                    log-probs of the children of frontier nodes -> [n, vocab]
    end_cycle()                     forget this cycle's tree (keep only committed context)

``visible`` is a boolean ``[n, n_fed + n]`` matrix over this cycle's fed tree nodes (feeding
order, the new ones last): node i sees slot j iff j is i or an ancestor; the context always.
The built-in kinds run batched (``RowDrafter``) and decode one sequence as a batch of one.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod

import numpy as np
import torch

from simspec.engine.kv_rows import TREE_SLOTS, RowSlotCache, causal, padded, rows_mask
from simspec.engine.modeling import base_and_head, head_logits
from simspec.engine.models import LoadedModel
from simspec.errors import SimspecError

Feed = tuple[np.ndarray, int, np.ndarray]  # a row's frontier tokens, their depth, their visible slots


class Drafter(ABC):
    """A draft model for one target. See the module docstring for the protocol."""

    name: str = "drafter"
    # Optional capabilities, declared here so the engine never probes for them:
    uses_target_hidden: bool = False  # reads the target's hidden states (gathered only when asked)
    feature_layers: tuple[int, ...] | None = None  # with them: the target layers whose inputs it fuses
    #                                                (EAGLE-3); None: the target's last hidden state
    # At T > 0 a chain (W = 1) from a drafter that models the text's distribution itself is
    # sampled from it and verified by the q-aware rule; feature heads draft top-k point masses.
    samples_chains: bool = False
    draft_vocab: torch.Tensor | None = None  # draft index -> target token id, for a reduced vocabulary
    # batches decode through rows_class(drafter, batch, capacity); None: batch 1 only (OneRow)
    rows_class: type[RowDrafter] | None = None

    def target_layers(self) -> tuple[int, ...] | None:
        """The target layers ``TargetRows`` gathers features from (None: the last hidden state, or none)."""
        return self.feature_layers if self.uses_target_hidden else None

    def top_candidates(self, logprobs: torch.Tensor, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The k best children per row as host arrays (log-probs, target token ids)."""
        top = torch.topk(logprobs, k, dim=-1)
        ids = top.indices if self.draft_vocab is None else self.draft_vocab[top.indices]
        return top.values.cpu().numpy(), ids.cpu().numpy()

    @abstractmethod
    def reset(self, prompt: torch.Tensor, prompt_hidden: torch.Tensor | None) -> None: ...

    @abstractmethod
    def commit(self, tokens: torch.Tensor, hidden: torch.Tensor | None) -> None: ...

    @abstractmethod
    def draft_root(self) -> torch.Tensor: ...

    @abstractmethod
    def draft_level(self, tokens: torch.Tensor, depth: int, visible: torch.Tensor) -> torch.Tensor: ...

    @abstractmethod
    def end_cycle(self) -> None: ...


class RowDrafter:
    """A drafter over ``batch`` rows, each one sequence (protocol: ``batch_models``)."""

    def __init__(self, drafter: Drafter, batch: int) -> None:
        self.drafter, self.batch = drafter, batch
        self.name = drafter.name
        self.uses_target_hidden = drafter.uses_target_hidden
        self.committed = np.zeros(batch, dtype=np.int64)  # cache slots of each row's sequence
        self.fill = np.zeros(batch, dtype=np.int64)  # ... plus this cycle's fed tree nodes
        self.pending: list[list[torch.Tensor]] = [[] for _ in range(batch)]

    def top_candidates(self, logprobs: torch.Tensor, k: int) -> tuple[np.ndarray, np.ndarray]:
        return self.drafter.top_candidates(logprobs, k)

    def target_layers(self) -> tuple[int, ...] | None:
        return self.drafter.target_layers()

    def _begin(self, width: int, visible: dict[int, np.ndarray], dtype: torch.dtype) -> torch.Tensor:
        """The mask of a forward of ``width`` tokens per row, its cache set to write after each row's fill."""
        self.cache.begin(self.fill)
        return rows_mask(int(self.fill.max()) + width, self.committed, [visible.get(b) for b in range(self.batch)],
                         self.fill, width, dtype, self.device)

    def end_cycle(self) -> None:
        self.fill[:] = self.committed

    def release(self, b: int) -> None:
        """Row ``b`` idles from now on: no context (``TargetRows.release``)."""
        self.committed[b] = self.fill[b] = 0
        self.pending[b] = []


class RowsDrafter(Drafter):
    """A drafter whose single-sequence protocol runs its ``rows_class`` at batch 1."""

    def reset(self, prompt: torch.Tensor, prompt_hidden: torch.Tensor | None) -> None:
        # the prompt and a tree's worth of slots; the committed tokens grow it (doubling)
        self._one = self.rows_class(self, 1, len(prompt) + TREE_SLOTS)
        self._one.reset_row(0, prompt, prompt_hidden)

    def commit(self, tokens: torch.Tensor, hidden: torch.Tensor | None) -> None:
        self._one.commit(0, tokens, hidden)

    def draft_root(self) -> torch.Tensor:
        return self._one.draft_root([0])[0]

    def draft_level(self, tokens: torch.Tensor, depth: int, visible: torch.Tensor) -> torch.Tensor:
        return self._one.draft_level([0], [(tokens.cpu().numpy(), depth, visible.cpu().numpy())])[0]

    def end_cycle(self) -> None:
        self._one.end_cycle()


class LMRows(RowDrafter):
    """A causal LM drafter (``CausalLMDrafter``) over rows, with its own ``RowSlotCache``."""

    def __init__(self, drafter: CausalLMDrafter, batch: int, capacity: int) -> None:
        super().__init__(drafter, batch)
        self.base, self.head = drafter._base, drafter._head
        self.cache = RowSlotCache(drafter.model, batch, capacity)
        self.device = drafter._head.weight.device

    def reset_row(self, b: int, prompt: torch.Tensor, prompt_hidden: torch.Tensor | None) -> None:
        self.committed[b] = self.fill[b] = 0
        self.pending[b] = [prompt]

    def commit(self, b: int, tokens: torch.Tensor, hidden: torch.Tensor | None) -> None:
        self.pending[b].append(tokens)

    def _forward(self, tokens: dict[int, np.ndarray], positions: dict[int, np.ndarray],
                 visible: dict[int, np.ndarray]) -> torch.Tensor:
        width = max(len(t) for t in tokens.values())
        mask = self._begin(width, visible, self.base.dtype)
        out = self.base(input_ids=torch.as_tensor(padded(tokens, self.batch, width), device=self.device),
                        position_ids=torch.as_tensor(padded(positions, self.batch, width), device=self.device),
                        attention_mask=mask, past_key_values=self.cache, use_cache=True)
        return out.last_hidden_state

    def _logprobs(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(head_logits(self.head, hidden).float(), dim=-1)

    def draft_root(self, rows: list[int]) -> torch.Tensor:
        tokens = {b: torch.cat(self.pending[b]).cpu().numpy() for b in rows}
        positions = {b: self.committed[b] + np.arange(len(t)) for b, t in tokens.items()}
        hidden = self._forward(tokens, positions, {b: causal(len(t)) for b, t in tokens.items()})
        last = torch.stack([hidden[b, len(tokens[b]) - 1] for b in rows])
        for b in rows:
            self.pending[b] = []
            self.committed[b] += len(tokens[b])
            self.fill[b] = self.committed[b]
        return self._logprobs(last)

    def draft_level(self, rows: list[int], feeds: list[Feed]) -> list[torch.Tensor]:
        tokens = {b: f[0] for b, f in zip(rows, feeds)}
        positions = {b: np.full(len(f[0]), self.committed[b] - 1 + f[1]) for b, f in zip(rows, feeds)}
        hidden = self._forward(tokens, positions, {b: f[2] for b, f in zip(rows, feeds)})
        for b in rows:
            self.fill[b] += len(tokens[b])
        return [self._logprobs(hidden[b, : len(tokens[b])]) for b in rows]


class CausalLMDrafter(RowsDrafter):
    """Any Hugging Face causal LM sharing the target's tokenizer; with ``draft_vocab`` (target ids)
    children are scored over those rows of its LM head only."""

    samples_chains = True
    rows_class = LMRows

    def __init__(self, model: torch.nn.Module, name: str, draft_vocab: torch.Tensor | None = None) -> None:
        self.model = model
        self.name = name
        self._base, self._head = base_and_head(model)
        if draft_vocab is not None:
            weight = self._head.weight.detach()
            self.draft_vocab = draft_vocab.to(weight.device)
            self._head = torch.nn.Linear(weight.shape[1], len(draft_vocab), bias=False, device=weight.device,
                                         dtype=weight.dtype)
            self._head.weight = torch.nn.Parameter(weight[self.draft_vocab].contiguous(), requires_grad=False)


def truncated_target(target: LoadedModel, n_layers: int) -> torch.nn.Module:
    """The target's first ``n_layers`` decoder layers, final norm and head (shared weights): a
    zero-training stand-in drafter."""
    base, head = base_and_head(target.model)
    if not hasattr(base, "layers") or not 1 <= n_layers <= len(base.layers):
        raise SimspecError(f"cannot take {n_layers} layers of {target.name!r}")
    config = copy.deepcopy(target.model.config)
    config.num_hidden_layers = n_layers
    with torch.device("meta"):
        draft = type(target.model)(config)
    draft_base = getattr(draft, draft.base_model_prefix)
    for name, module in base.named_children():
        setattr(draft_base, name, torch.nn.ModuleList(module[:n_layers]) if name == "layers" else module)
    draft.set_output_embeddings(head)
    return draft.eval()
