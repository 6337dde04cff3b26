"""The target's side of a decoding cycle: its KV cache (static: ``kv_slots.SlotCache``), and the
forward that extends it causally (prefill, plain decoding) or as a tree (verification), keeping
the features a drafter reads."""

from __future__ import annotations

import numpy as np
import torch

from simspec.engine.kv_slots import SlotCache
from simspec.engine.modeling import additive_mask, base_and_head
from simspec.engine.models import LoadedModel


class TargetCache:
    """The target's KV cache plus the forward pass that extends it.

    ``feature_layers``: the decoder layers whose inputs a drafter fuses (EAGLE-3); each
    forward then also leaves them, concatenated, in ``features``. Without it ``features`` is
    the last hidden state (after the final norm), what an EAGLE-1/2 head reads. ``capacity``:
    the positions to allocate (prompt, new tokens and the largest tree; more reallocates once)."""

    def __init__(self, target: LoadedModel, feature_layers: tuple[int, ...] | None = None,
                 capacity: int = 1024) -> None:
        self.base, self.head = base_and_head(target.model)
        self.cache = SlotCache(target.model, capacity)
        self.length = 0  # committed tokens in the cache
        self.feature_layers = feature_layers
        self.features: torch.Tensor | None = None

    def forward(self, tokens: torch.Tensor, depths: np.ndarray | None = None, visible: np.ndarray | None = None):
        """Run ``tokens`` after the committed context: causally, or as a tree (positions
        ``length + depths``, attention to the context and to ``visible`` ancestors)."""
        device = tokens.device
        if depths is None:
            positions = torch.arange(self.length, self.length + len(tokens), device=device)
            mask = None
        else:
            positions = torch.as_tensor(self.length + depths, device=device)
            mask = additive_mask(torch.as_tensor(visible, device=device), self.length, self.base.dtype)
        out = self.base(
            input_ids=tokens[None],
            position_ids=positions[None],
            attention_mask=mask,
            past_key_values=self.cache,
            use_cache=True,
            output_hidden_states=self.feature_layers is not None,
        )
        if self.feature_layers is None:
            self.features = out.last_hidden_state[0]
        else:  # hidden_states[i] is the input of decoder layer i
            self.features = torch.cat([out.hidden_states[i][0] for i in self.feature_layers], dim=-1)
        return out.last_hidden_state[0]

    def keep(self, rows: np.ndarray, n_new: int) -> None:
        """Of the ``n_new`` tokens just run, keep ``rows`` (ascending) and drop the rest: the
        accepted path's keys and values move into the slots after the committed context."""
        if rows[-1] == len(rows) - 1:  # a prefix of the flattened tree: already in place
            if n_new > len(rows):
                self.cache.crop(len(rows) - n_new)
        else:
            self.cache.keep(self.length, torch.as_tensor(rows, device=self.cache.layers[0].device))
        self.length += len(rows)
