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

``visible`` is a boolean ``[n, n_fed + n]`` matrix over the tree nodes fed to the drafter in
this cycle (in feeding order, the new ones last): node i may attend to slot j iff slot j is
i itself or one of its ancestors. The committed context is always visible.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod

import numpy as np
import torch

from simspec.engine.modeling import additive_mask, base_and_head, head_logits
from simspec.engine.models import LoadedModel
from simspec.errors import SimspecError


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

    def target_layers(self) -> tuple[int, ...] | None:
        """The target layers ``TargetRows`` gathers features from for this drafter (None: the
        last hidden state, or none at all when it reads no hidden states)."""
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


class CausalLMDrafter(Drafter):
    """Any Hugging Face causal LM sharing the target's tokenizer, with its own KV cache.

    With ``draft_vocab`` (target ids), children are scored over those rows of the LM head
    only: a reduced output vocabulary, as the EAGLE drafter has."""

    samples_chains = True

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
        self._cache = None
        self._committed = 0  # tokens of the cache that belong to the sequence (root included)
        self._pending: list[torch.Tensor] = []  # committed tokens not yet run through the model

    def reset(self, prompt: torch.Tensor, prompt_hidden: torch.Tensor | None) -> None:
        from simspec.engine.kv_slots import TREE_SLOTS, SlotCache

        # the prompt and a tree's worth of slots; the committed tokens grow it (doubling)
        self._cache = SlotCache(self.model, len(prompt) + TREE_SLOTS)
        self._committed = 0
        self._pending = [prompt]

    def commit(self, tokens: torch.Tensor, hidden: torch.Tensor | None) -> None:
        self._pending.append(tokens)

    def _forward(self, tokens: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        out = self._base(
            input_ids=tokens[None],
            position_ids=positions[None],
            attention_mask=mask,
            past_key_values=self._cache,
            use_cache=True,
        )
        return out.last_hidden_state[0]

    def draft_root(self) -> torch.Tensor:
        tokens = torch.cat(self._pending) if len(self._pending) > 1 else self._pending[0]
        self._pending = []
        positions = torch.arange(self._committed, self._committed + len(tokens), device=tokens.device)
        hidden = self._forward(tokens, positions, None)
        self._committed += len(tokens)
        return torch.log_softmax(head_logits(self._head, hidden[-1:]).float(), dim=-1)[0]

    def draft_level(self, tokens: torch.Tensor, depth: int, visible: torch.Tensor) -> torch.Tensor:
        root_position = self._committed - 1
        positions = torch.full((len(tokens),), root_position + depth, device=tokens.device)
        mask = additive_mask(visible, self._committed, self._base.dtype)
        hidden = self._forward(tokens, positions, mask)
        return torch.log_softmax(head_logits(self._head, hidden).float(), dim=-1)

    def end_cycle(self) -> None:
        extra = self._cache.get_seq_length() - self._committed
        if extra > 0:
            self._cache.crop(-extra)


def truncated_target(target: LoadedModel, n_layers: int) -> torch.nn.Module:
    """The target's first ``n_layers`` decoder layers with its final norm and head, sharing
    the target's weights: a zero-training stand-in drafter (and a partial-acceptance test)."""
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
