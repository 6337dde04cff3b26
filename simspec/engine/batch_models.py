"""The models' side of batched decoding: the target and the drafters over ``B`` rows, each row
one sequence with its own length (``kv_rows``). Every forward runs the whole batch, each row's
new tokens padded to the longest (as a CUDA-graph server does).

Drafters (``drafter.RowDrafter``) keep the protocol of ``simspec.engine.drafter`` per row, every
row's drafting step in one forward:

    reset_row(b, prompt, prompt_hidden)       row b starts a new sequence
    commit(b, tokens, hidden)                 tokens the target accepted in row b
    draft_root(rows)                          -> [len(rows), vocab]
    draft_level(rows, feeds)                  feeds[i] = (frontier tokens, depth, visible) of rows[i]
                                              -> per row [n_i, vocab]
    end_cycle()                               every row forgets its tree
"""

from __future__ import annotations

import numpy as np
import torch

from simspec.engine.drafter import Drafter, Feed, RowDrafter
from simspec.engine.kv_rows import RowSlotCache, padded, rows_mask
from simspec.engine.modeling import base_and_head
from simspec.engine.models import LoadedModel
from simspec.errors import SimspecError


class TargetRows:
    """The target over ``batch`` rows: a new sequence's prefill into one row, and tree (or
    single-token) forwards of every row at once after each row's committed length."""

    def __init__(self, target: LoadedModel, batch: int, capacity: int,
                 feature_layers: tuple[int, ...] | None = None) -> None:
        self.base, self.head = base_and_head(target.model)
        self.batch, self.device, self.feature_layers = batch, target.device, feature_layers
        self.cache = self._new_cache(target, capacity)
        self.lengths = np.zeros(batch, dtype=np.int64)  # committed tokens per row

    def _new_cache(self, target: LoadedModel, capacity: int):
        return RowSlotCache(target.model, self.batch, capacity)

    def _outputs(self, out) -> tuple[torch.Tensor, torch.Tensor]:
        """A forward's last hidden states and the features a drafter reads (``feature_layers``)."""
        if self.feature_layers is None:
            return out.last_hidden_state, out.last_hidden_state
        # hidden_states[i] is the input of decoder layer i
        return out.last_hidden_state, torch.cat([out.hidden_states[i] for i in self.feature_layers], dim=-1)

    def _run(self, tokens: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor]:
        return self._outputs(self.base(input_ids=tokens, position_ids=positions, attention_mask=mask,
                                       past_key_values=self.cache, use_cache=True,
                                       output_hidden_states=self.feature_layers is not None))

    def prefill(self, b: int, prompt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Row ``b`` starts ``prompt``: its last hidden states and features, ``[P, ·]``."""
        n = len(prompt)
        self.cache.begin(0, row=b)
        # no mask: the forward reads row b's slots alone, causally (the model's own causal mask)
        hidden, features = self._run(prompt[None], torch.arange(n, device=self.device)[None], None)
        self.lengths[b] = n
        return hidden[0], features[0]

    def forward(self, trees: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """Row ``b`` runs ``trees[b]`` = (tokens, depths, visible) after its committed length (the
        others idle as padding); hidden states and features ``[B, T, ·]``."""
        width = max(len(t[0]) for t in trees.values())
        tokens = padded({b: t[0] for b, t in trees.items()}, self.batch, width)
        positions = self.lengths[:, None] + padded({b: t[1] for b, t in trees.items()}, self.batch, width)
        visible = [trees[b][2] if b in trees else None for b in range(self.batch)]
        # one row, one token (a plain step): it sees every slot up to itself, no mask needed
        mask = None if self.batch == 1 and width == 1 else rows_mask(
            int(self.lengths.max()) + width, self.lengths, visible, self.lengths, width, self.base.dtype, self.device)
        self.cache.begin(self.lengths)
        return self._run(torch.as_tensor(tokens, device=self.device), torch.as_tensor(positions, device=self.device),
                         mask)

    def keep(self, b: int, rows: np.ndarray) -> None:
        """Row ``b`` keeps ``rows`` (ascending) of the tokens it just ran, moved after its context."""
        if rows[-1] != len(rows) - 1:  # not a prefix of the flattened tree: move it into place
            self.cache.keep(b, int(self.lengths[b]), torch.as_tensor(rows, device=self.device))
        self.lengths[b] += len(rows)

    def release(self, b: int) -> None:
        """Row ``b`` idles from now on, holding no context (its length must not widen the attention)."""
        self.lengths[b] = 0


class OneRow(RowDrafter):
    """Any drafter at batch 1 through its own ``Drafter`` protocol: a kind that declared no rows."""

    def reset_row(self, b: int, prompt: torch.Tensor, prompt_hidden: torch.Tensor | None) -> None:
        self.device = prompt.device
        self.drafter.reset(prompt, prompt_hidden)

    def commit(self, b: int, tokens: torch.Tensor, hidden: torch.Tensor | None) -> None:
        self.drafter.commit(tokens, hidden)

    def draft_root(self, rows: list[int]) -> torch.Tensor:
        return self.drafter.draft_root()[None]

    def draft_level(self, rows: list[int], feeds: list[Feed]) -> list[torch.Tensor]:
        frontier, depth, visible = feeds[0]
        return [self.drafter.draft_level(torch.as_tensor(frontier, device=self.device), depth,
                                         torch.as_tensor(visible, device=self.device))]

    def end_cycle(self) -> None:
        self.drafter.end_cycle()

    def release(self, b: int) -> None:
        pass


def batched(drafter: Drafter, batch: int, capacity: int) -> RowDrafter:
    """The batched form of a drafter, by its kind's ``rows_class`` (``OneRow`` at batch 1)."""
    if drafter.rows_class is None and batch == 1:
        return OneRow(drafter, 1)
    if drafter.rows_class is None:
        raise SimspecError(f"drafter {drafter.name!r} ({type(drafter).__name__}) cannot decode batches: use "
                           "--batch-size 1, or a drafter whose kind declares batch rows "
                           "(Drafter.rows_class)")
    return drafter.rows_class(drafter, batch, capacity)

