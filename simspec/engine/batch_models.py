"""The models' side of batched decoding: the target and the drafters over ``B`` rows, each row
one sequence with its own length (``kv_rows``). Every forward runs the whole batch, each row's
new tokens padded to the longest (what a CUDA-graph server does); a row with nothing to run
this step is all padding.

Drafters keep the single-sequence protocol of ``simspec.engine.drafter`` per row, with the
drafting steps of every row in one forward:

    reset_row(b, prompt, prompt_hidden)       row b starts a new sequence
    commit(b, tokens, hidden)                 tokens the target accepted in row b
    draft_root(rows)                          log-probs of each row's root children -> [len(rows), vocab]
    draft_level(rows, feeds)                  feeds[i] = (frontier tokens, depth, visible) of rows[i]
                                              -> per row [n_i, vocab]
    end_cycle()                               every row forgets its tree
"""

from __future__ import annotations

import numpy as np
import torch

from simspec.engine.drafter import CausalLMDrafter, Drafter
from simspec.engine.eagle import EagleDrafter
from simspec.engine.kv_rows import RowSlotCache, RowSlots, causal, rows_mask
from simspec.engine.modeling import base_and_head, head_logits
from simspec.engine.models import LoadedModel
from simspec.errors import SimspecError

Feed = tuple[np.ndarray, int, np.ndarray]  # a row's frontier tokens, their depth, their visible slots


def padded(rows: dict[int, np.ndarray], batch: int, width: int) -> np.ndarray:
    out = np.zeros((batch, width), dtype=np.int64)
    for b, values in rows.items():
        out[b, : len(values)] = values
    return out


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
        """Row ``b`` runs ``trees[b]`` = (tokens, depths, visible) after its committed length
        (rows not in ``trees`` idle as padding). Hidden states and features ``[B, T, ·]``."""
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
        """Row ``b`` keeps ``rows`` (ascending) of the tokens it just ran: the accepted path's
        keys and values move into the slots after its committed context."""
        if rows[-1] != len(rows) - 1:  # not a prefix of the flattened tree: move it into place
            self.cache.keep(b, int(self.lengths[b]), torch.as_tensor(rows, device=self.device))
        self.lengths[b] += len(rows)

    def release(self, b: int) -> None:
        """Row ``b`` idles from now on (the queue is empty): as padding it holds no context, so
        that its finished sequence's length no longer widens every forward's attention."""
        self.lengths[b] = 0


class RowDrafter:
    """A drafter's batched form; subclasses run the model (``_forward``) and score (``_logprobs``)."""

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

    def end_cycle(self) -> None:
        self.fill[:] = self.committed

    def release(self, b: int) -> None:
        """Row ``b`` idles from now on: no context (``TargetRows.release``)."""
        self.committed[b] = self.fill[b] = 0
        self.pending[b] = []


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
        mask = rows_mask(int(self.fill.max()) + width, self.committed,
                         [visible.get(b) for b in range(self.batch)], self.fill, width, self.base.dtype, self.device)
        self.cache.begin(self.fill)
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


class EagleRows(RowDrafter):
    """An EAGLE-style feature head (``EagleDrafter``: simspec's, EAGLE-3 or EAGLE-1/2) over rows."""

    def __init__(self, drafter: EagleDrafter, batch: int, capacity: int) -> None:
        super().__init__(drafter, batch)
        self.head, self.embed, self.device, self.dtype = drafter.head, drafter.embed, drafter.device, drafter._dtype
        self.cache = RowSlots(batch, capacity)
        self.positions = np.zeros(batch, dtype=np.int64)  # next token position per row
        self.features: list[list[torch.Tensor]] = [[] for _ in range(batch)]  # pending target features
        self.nodes: list[list[torch.Tensor]] = [[] for _ in range(batch)]  # root, then this cycle's fed nodes

    def reset_row(self, b: int, prompt: torch.Tensor, prompt_hidden: torch.Tensor | None) -> None:
        # Pairs (f_t, x_{t+1}) for t < P - 1; the last prompt feature pairs with the root.
        self.pending[b], self.features[b] = [prompt[1:]], [prompt_hidden[:-1]]
        self.positions[b], self.committed[b], self.fill[b] = 1, 0, 0
        self.nodes[b] = []

    def commit(self, b: int, tokens: torch.Tensor, hidden: torch.Tensor | None) -> None:
        self.pending[b].append(tokens)
        self.features[b].append(hidden)

    def _forward(self, tokens: dict[int, torch.Tensor], features: dict[int, torch.Tensor],
                 positions: dict[int, np.ndarray], visible: dict[int, np.ndarray]) -> torch.Tensor:
        width = max(len(t) for t in tokens.values())
        ids = torch.zeros((self.batch, width), dtype=torch.long, device=self.device)
        feats = None
        for b, t in tokens.items():
            ids[b, : len(t)] = t
            f = features[b]
            if feats is None:
                feats = f.new_zeros((self.batch, width, f.shape[-1]))
            feats[b, : len(f)] = f
        mask = rows_mask(int(self.fill.max()) + width, self.committed, [visible.get(b) for b in range(self.batch)],
                         self.fill, width, self.dtype, self.device)
        self.cache.begin(self.fill)
        pos = torch.as_tensor(padded(positions, self.batch, width), device=self.device)
        return self.head(feats, self.embed(ids), pos, mask, self.cache)

    def _logprobs(self, out: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.head.logits(out).float(), dim=-1)

    def draft_root(self, rows: list[int]) -> torch.Tensor:
        tokens = {b: torch.cat(self.pending[b]) for b in rows}
        features = {b: self.head.project(torch.cat(self.features[b])) for b in rows}
        positions = {b: self.positions[b] + np.arange(len(t)) for b, t in tokens.items()}
        out = self._forward(tokens, features, positions, {b: causal(len(t)) for b, t in tokens.items()})
        last = []
        for b in rows:
            n = len(tokens[b])
            self.pending[b], self.features[b] = [], []
            self.positions[b] += n
            self.committed[b] += n
            self.fill[b] = self.committed[b]
            self.nodes[b] = [out[b, n - 1: n]]
            last.append(out[b, n - 1])
        return self._logprobs(torch.stack(last))

    def draft_level(self, rows: list[int], feeds: list[Feed]) -> list[torch.Tensor]:
        tokens, features, positions, visible = {}, {}, {}, {}
        for b, (frontier, depth, vis) in zip(rows, feeds):
            n = len(frontier)
            n_fed = vis.shape[1] - n
            # a node's parent is its deepest visible fed slot (fed level by level), or the root
            parents = (vis[:, :n_fed] * np.arange(1, n_fed + 1)).max(axis=1) if n_fed else np.zeros(n, dtype=np.int64)
            tokens[b] = torch.as_tensor(frontier, device=self.device)
            features[b] = torch.cat(self.nodes[b])[torch.as_tensor(parents, device=self.device)]
            positions[b] = np.full(n, self.positions[b] - 1 + depth)
            visible[b] = vis
        out = self._forward(tokens, features, positions, visible)
        result = []
        for b in rows:
            n = len(tokens[b])
            self.nodes[b].append(out[b, :n])
            self.fill[b] += n
            result.append(self._logprobs(out[b, :n]))
        return result

    def end_cycle(self) -> None:
        super().end_cycle()
        for b in range(self.batch):
            del self.nodes[b][1:]  # only the root's predicted feature outlives the cycle

    def release(self, b: int) -> None:
        super().release(b)
        self.features[b], self.nodes[b] = [], []


# Drafter class -> its rows' class: the capability a drafter kind declares to decode batches
# (``declare_rows``; a subclass inherits its base's). A drafter format of a plugin declares its own.
ROWS: dict[type, type] = {EagleDrafter: EagleRows, CausalLMDrafter: LMRows}


def declare_rows(drafter_class: type, rows_class: type) -> None:
    """``drafter_class``'s drafters decode batches through ``rows_class(drafter, batch, capacity)``
    (a ``RowDrafter``)."""
    ROWS[drafter_class] = rows_class


class OneRow(RowDrafter):
    """Any drafter at batch 1, through its own single-sequence protocol (``Drafter``): what a
    drafter kind that declared no rows class decodes with."""

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
    """The batched form of a drafter, by the rows class its kind declared (at batch 1, any
    drafter: ``OneRow``); one line for a kind that declared none."""
    rows = next((ROWS[kind] for kind in type(drafter).__mro__ if kind in ROWS), None)
    if rows is None and batch == 1:
        return OneRow(drafter, 1)
    if rows is None:
        raise SimspecError(f"drafter {drafter.name!r} ({type(drafter).__name__}) cannot decode batches: use "
                           "--batch-size 1, or a drafter whose kind declares batch rows "
                           "(simspec.engine.batch_models.declare_rows)")
    return rows(drafter, batch, capacity)

