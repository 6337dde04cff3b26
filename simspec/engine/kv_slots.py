"""A static KV cache for Hugging Face decoders: each layer's keys and values live in buffers
allocated once per sequence, a forward writes its tokens into the slots after the filled length,
and accepting a tree path moves the path's rows into place. Nothing is concatenated or cropped
by copying per step, as ``DynamicCache`` does (its ``torch.cat`` re-copies the whole context at
every forward).

Attention reads the filled prefix (a view), so eager forwards cost what the context costs, not
the capacity. A sequence that outgrows its capacity (a caller's underestimate) reallocates once,
doubling: correct, only slower."""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, DynamicLayer

# Slots allocated beyond a sequence's known tokens: the largest tree a cycle verifies (a larger
# one, or a sequence longer than its caller said, reallocates the cache once, correctly)
TREE_SLOTS = 512


def move_rows(buffer: torch.Tensor, start: int, rows: torch.Tensor, source: int | None = None) -> None:
    """Of ``buffer``'s slots (dimension -2) from ``source`` on (default ``start``), copy ``rows``
    (ascending offsets) to ``start``, ``start + 1``, ...: an accepted path moved into place.
    index_select copies first, so a row moving onto a slot another row still has to leave is
    read before it is overwritten."""
    buffer[..., start:start + len(rows), :] = buffer.index_select(-2, (start if source is None else source) + rows)


class SlotLayer(DynamicLayer):
    """One decoder layer's cache: ``[batch, kv_heads, capacity, head_dim]`` buffers and a fill
    length; ``keys`` / ``values`` are views of the filled slots (what attention reads)."""

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity
        self.length = 0

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device = key_states.device
        self._keys = key_states.new_empty((*key_states.shape[:2], self.capacity, key_states.shape[-1]))
        self._values = value_states.new_empty((*value_states.shape[:2], self.capacity, value_states.shape[-1]))
        self.is_initialized = True
        self._view()

    def _view(self) -> None:
        self.keys = self._keys[..., : self.length, :]
        self.values = self._values[..., : self.length, :]

    def _reserve(self, end: int) -> None:
        if end > self._keys.shape[-2]:
            capacity = max(end, 2 * self._keys.shape[-2])
            for name in ("_keys", "_values"):
                old = getattr(self, name)
                new = old.new_empty((*old.shape[:2], capacity, old.shape[-1]))
                new[..., : self.length, :] = old[..., : self.length, :]
                setattr(self, name, new)
            self.capacity = capacity

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
               ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self.length + key_states.shape[-2]
        self._reserve(end)
        self._keys[..., self.length:end, :] = key_states
        self._values[..., self.length:end, :] = value_states
        self.length = end
        self._view()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length

    def crop(self, tokens_to_remove: int) -> None:
        """Drop the last ``-tokens_to_remove`` slots (``DynamicLayer``'s convention: a negative count)."""
        if tokens_to_remove > 0:
            raise ValueError(f"crop takes a negative count of tokens to remove, not {tokens_to_remove}")
        self.length = max(0, self.length + tokens_to_remove)
        if self.is_initialized:
            self._view()

    def keep(self, start: int, rows: torch.Tensor) -> None:
        """Of the slots from ``start`` on, keep ``rows`` (ascending offsets), moved to ``start``,
        ``start + 1``, ...; the rest are dropped."""
        if self.is_initialized:
            move_rows(self._keys, start, rows)
            move_rows(self._values, start, rows)
        self.length = start + len(rows)
        if self.is_initialized:
            self._view()

    def reset(self) -> None:
        self.length = 0
        if self.is_initialized:
            self._view()


class SlotCache(Cache):
    """One ``SlotLayer`` per decoder layer of ``model`` (its ``config.num_hidden_layers``)."""

    def __init__(self, model: torch.nn.Module, capacity: int) -> None:
        config = model.config.get_text_config(decoder=True) if hasattr(model.config, "get_text_config") \
            else model.config
        super().__init__(layers=[SlotLayer(capacity) for _ in range(config.num_hidden_layers)])

    def keep(self, start: int, rows: torch.Tensor) -> None:
        """Every layer keeps ``rows`` of the slots from ``start`` on (``SlotLayer.keep``)."""
        for layer in self.layers:
            layer.keep(start, rows)
