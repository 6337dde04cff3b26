"""The batched target under the compiled runtime (``engine.runtime``): ``TargetRows`` over the
model's one ``StaticCache`` of ``B`` rows and a bucketed capacity, read whole through a mask, so
every forward after a prefill has one of a few static shapes.

A static cache writes every row at the same slots, so a forward writes after the longest row
(``start``): row ``b`` sees its committed slots and its block there, and acceptance moves its
kept tokens down to its length (the slots between stay masked). A prefill runs eagerly in a
scratch cache and is copied into its row.
"""

from __future__ import annotations

import numpy as np
import torch

from simspec.engine.batch_models import TargetRows
from simspec.engine.kv_rows import RowSlotCache, move_rows, padded, rows_mask
from simspec.engine.models import LoadedModel
from simspec.errors import SimspecError


class CompiledTargetRows(TargetRows):
    """``TargetRows`` whose forwards after the prefill run compiled (module docstring)."""

    def _new_cache(self, target: LoadedModel, capacity: int):
        from simspec.engine.runtime import capacity_bucket, compiled_forward

        self.model = target.model
        self.capacity = capacity_bucket(capacity)
        self.compiled = compiled_forward(self.base)
        self.start = 0  # the slot where the last forward wrote every row's first token
        return self.compiled.cache(self.capacity, self.batch)  # the model's: one batch at a time

    def prefill(self, b: int, prompt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n = len(prompt)
        if n > self.capacity:
            raise SimspecError(f"a prompt of {n} tokens does not fit the batch's cache of {self.capacity} slots")
        scratch = RowSlotCache(self.model, 1, n)
        scratch.begin(0)
        out = self.base(input_ids=prompt[None], position_ids=torch.arange(n, device=self.device)[None],
                        past_key_values=scratch, use_cache=True, output_hidden_states=self.feature_layers is not None)
        for src, dst in zip(scratch.layers, self.cache.layers):
            if not dst.is_initialized:  # allocated at the batch's shape, from the first row's dtype and heads
                dst.lazy_initialization(src.keys[..., :1, :].expand(self.batch, -1, -1, -1),
                                        src.values[..., :1, :].expand(self.batch, -1, -1, -1))
            dst.keys[b, :, :n] = src.keys[0]
            dst.values[b, :, :n] = src.values[0]
        self.lengths[b] = n
        hidden, features = self._outputs(out)
        return hidden[0], features[0]

    def forward(self, trees: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]
                ) -> tuple[torch.Tensor, torch.Tensor]:
        from simspec.engine.runtime import bucket

        size = bucket(max(len(t[0]) for t in trees.values()))
        start = int(self.lengths.max())
        if start + size > self.capacity:
            self._grow(start + size)
        tokens = padded({b: t[0] for b, t in trees.items()}, self.batch, size)
        positions = self.lengths[:, None] + padded({b: t[1] for b, t in trees.items()}, self.batch, size)
        starts = np.full(self.batch, start)
        mask = rows_mask(self.capacity, self.lengths, [trees[b][2] if b in trees else None for b in range(self.batch)],
                         starts, size, self.base.dtype, self.device, blocks=starts)
        for layer in self.cache.layers:  # where this forward writes (StaticLayer counts in a tensor)
            layer.cumulative_length.fill_(start)
        hidden_states = self.feature_layers is not None
        out = self.compiled((size, self.capacity, hidden_states, self.batch),
                            input_ids=torch.as_tensor(tokens, device=self.device),
                            position_ids=torch.as_tensor(positions, device=self.device),
                            cache_position=torch.arange(start, start + size, device=self.device),
                            attention_mask=mask, past_key_values=self.cache, use_cache=True,
                            output_hidden_states=hidden_states)
        self.start = start
        hidden, features = self._outputs(out)
        if self.compiled.cuda:  # a CUDA graph's outputs live in memory its next replay overwrites
            hidden, features = hidden.clone(), features.clone()
        return hidden, features

    def _grow(self, slots: int) -> None:
        """Move every row's context to the model's cache of the bucket that holds ``slots`` (a tree
        larger than planned): correct, only slower (a new graph)."""
        from simspec.engine.runtime import capacity_bucket

        old, self.capacity = self.cache, capacity_bucket(slots)
        self.cache = self.compiled.cache(self.capacity, self.batch)
        end = int(self.lengths.max())
        for src, dst in zip(old.layers, self.cache.layers):
            if not dst.is_initialized:
                dst.lazy_initialization(src.keys[..., :1, :], src.values[..., :1, :])
            dst.keys[..., :end, :] = src.keys[..., :end, :]
            dst.values[..., :end, :] = src.values[..., :end, :]

    def keep(self, b: int, rows: np.ndarray) -> None:
        length = int(self.lengths[b])
        if self.start != length or rows[-1] != len(rows) - 1:  # not already in place
            offsets = torch.as_tensor(rows, device=self.device)
            for layer in self.cache.layers:
                move_rows(layer.keys[b], length, offsets, self.start)
                move_rows(layer.values[b], length, offsets, self.start)
        self.lengths[b] += len(rows)


def target_rows(target: LoadedModel, batch: int, capacity: int, feature_layers: tuple[int, ...] | None = None,
                runtime: str = "eager") -> TargetRows:
    """The target over ``batch`` rows under ``runtime`` (``engine.runtime.RUNTIMES``)."""
    return (CompiledTargetRows if runtime == "compiled" else TargetRows)(target, batch, capacity, feature_layers)
