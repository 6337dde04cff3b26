"""The target's side of a decoding cycle: its KV cache (static: ``kv_slots.SlotCache``; under the
compiled runtime a full-capacity cache read through a mask), and the forward that extends it
causally (prefill, plain decoding) or as a tree (verification), keeping the features a drafter
reads."""

from __future__ import annotations

import numpy as np
import torch

from simspec.engine.kv_rows import causal, rows_mask
from simspec.engine.kv_slots import SlotCache, move_rows
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
        self.cache = self._new_cache(target, capacity)
        self.length = 0  # committed tokens in the cache
        self.feature_layers = feature_layers
        self.features: torch.Tensor | None = None

    def _new_cache(self, target: LoadedModel, capacity: int):
        return SlotCache(target.model, capacity)

    def _features(self, out, n: int) -> None:
        if self.feature_layers is None:
            self.features = out.last_hidden_state[0, :n]
        else:  # hidden_states[i] is the input of decoder layer i
            self.features = torch.cat([out.hidden_states[i][0, :n] for i in self.feature_layers], dim=-1)

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
        self._features(out, len(tokens))
        return out.last_hidden_state[0]

    def drop(self, n: int) -> None:
        """Forget the last ``n`` tokens run (the committed length never counted them)."""
        self.cache.crop(-n)

    def keep(self, rows: np.ndarray, n_new: int) -> None:
        """Of the ``n_new`` tokens just run, keep ``rows`` (ascending) and drop the rest: the
        accepted path's keys and values move into the slots after the committed context."""
        if rows[-1] == len(rows) - 1:  # a prefix of the flattened tree: already in place
            if n_new > len(rows):
                self.cache.crop(len(rows) - n_new)
        else:
            self.cache.keep(self.length, torch.as_tensor(rows, device=self.cache.layers[0].device))
        self.length += len(rows)


class CompiledTargetCache(TargetCache):
    """``TargetCache`` under the compiled runtime (``engine.runtime``): a Hugging Face
    ``StaticCache`` of a bucketed capacity (the model's one cache of that capacity, reset: a
    sequence at a time) that attention reads whole, through a mask, so that
    every forward after the prefill has one of a few static shapes. A forward's tokens are padded
    to their bucket; the padding's rows see the context only (finite keys and values, never read:
    they sit past the kept tokens, masked until a later forward overwrites them). The prefill
    runs eagerly (its length is the prompt's)."""

    def _new_cache(self, target: LoadedModel, capacity: int):
        from simspec.engine.runtime import capacity_bucket, compiled_forward

        self.capacity = capacity_bucket(capacity)
        self.compiled = compiled_forward(self.base)
        return self.compiled.cache(self.capacity)  # shared: one sequence at a time

    def forward(self, tokens: torch.Tensor, depths: np.ndarray | None = None, visible: np.ndarray | None = None):
        from simspec.engine.runtime import bucket

        device, n = tokens.device, len(tokens)
        hidden_states = self.feature_layers is not None
        if self.length == 0:  # the prefill, eager
            positions = torch.arange(n, device=device)
            out = self.base(input_ids=tokens[None], position_ids=positions[None], cache_position=positions,
                            past_key_values=self.cache, use_cache=True, output_hidden_states=hidden_states)
            self._features(out, n)
            return out.last_hidden_state[0]
        size = bucket(n)
        if self.length + size > self.capacity:
            self._grow(self.length + size)
        ids = torch.zeros(size, dtype=tokens.dtype, device=device)
        ids[:n] = tokens
        positions = torch.full((size,), self.length, dtype=torch.long, device=device)
        if depths is None:
            positions[:n] += torch.arange(n, device=device)
            visible = causal(n)
        else:
            positions[:n] += torch.as_tensor(depths, device=device)
        # a batch of one row: its padding queries see only their own slots
        at = np.array([self.length])
        mask = rows_mask(self.capacity, at, [visible], at, size, self.base.dtype, device)
        for layer in self.cache.layers:  # where this forward writes (StaticLayer counts in a tensor)
            layer.cumulative_length.fill_(self.length)
        out = self.compiled((size, self.capacity, hidden_states), input_ids=ids[None], position_ids=positions[None],
                            cache_position=torch.arange(self.length, self.length + size, device=device),
                            attention_mask=mask, past_key_values=self.cache, use_cache=True,
                            output_hidden_states=hidden_states)
        if self.compiled.cuda:  # a CUDA graph's outputs live in memory its next replay overwrites
            out.last_hidden_state = out.last_hidden_state.clone()
        self._features(out, n)
        return out.last_hidden_state[0, :n]

    def _grow(self, slots: int) -> None:
        """Move to the model's cache of the capacity bucket that holds ``slots`` (a tree larger than
        the caller planned for): the committed context is copied over. Correct, only slower (a new
        capacity is a new graph)."""
        from simspec.engine.runtime import capacity_bucket

        old, self.capacity = self.cache, capacity_bucket(slots)
        self.cache = self.compiled.cache(self.capacity)
        for src, dst in zip(old.layers, self.cache.layers):
            if not dst.is_initialized:
                dst.lazy_initialization(src.keys[..., :1, :], src.values[..., :1, :])
            dst.keys[..., : self.length, :] = src.keys[..., : self.length, :]
            dst.values[..., : self.length, :] = src.values[..., : self.length, :]

    def drop(self, n: int) -> None:
        pass  # a forward writes after ``length`` whatever the cache holds past it

    def keep(self, rows: np.ndarray, n_new: int) -> None:
        if rows[-1] != len(rows) - 1:  # not a prefix of the flattened tree: move the path into place
            offsets = torch.as_tensor(rows, device=self.cache.layers[0].keys.device)
            for layer in self.cache.layers:
                move_rows(layer.keys, self.length, offsets)
                move_rows(layer.values, self.length, offsets)
        self.length += len(rows)  # the slots past it are masked until a forward overwrites them


def target_cache(target: LoadedModel, feature_layers: tuple[int, ...] | None, capacity: int,
                 runtime: str = "eager") -> TargetCache:
    """The target's cache for one sequence under ``runtime`` (``engine.runtime.RUNTIMES``)."""
    return (CompiledTargetCache if runtime == "compiled" else TargetCache)(target, feature_layers, capacity)


@torch.inference_mode()
def warm_compiled(target: LoadedModel, feature_layers: tuple[int, ...] | None, capacity: int,
                  buckets: list[int]) -> None:
    """Compile now, not inside a timed run, the forwards of ``buckets`` tokens a sequence of
    ``capacity`` slots runs under the compiled runtime."""
    cache = CompiledTargetCache(target, feature_layers, capacity)
    device = next(target.model.parameters()).device
    cache.forward(torch.zeros(1, dtype=torch.long, device=device))
    cache.length = 1
    for size in buckets:
        cache.forward(torch.zeros(size, dtype=torch.long, device=device), np.arange(size), causal(size))
