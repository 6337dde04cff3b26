"""Static KV slots for a batch of sequences of their own lengths: ``[B, kv_heads, capacity,
head_dim]`` buffers, a row per sequence. A batch forward writes row ``b``'s tokens from
``starts[b]`` on (one scatter), attention reads up to the furthest write and a per-row mask hides
the rest; a prefill writes its row alone. The caller owns each row's length: slots past it hold
garbage, masked until overwritten. Hugging Face decoders (``RowSlotCache``) and the EAGLE heads
share ``RowSlots``."""

from __future__ import annotations

import numpy as np
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


class RowSlots:
    """One attention layer's keys and values for ``batch`` sequences (allocated on first write)."""

    def __init__(self, batch: int, capacity: int) -> None:
        self.batch, self.capacity = batch, capacity
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None
        self.starts = np.zeros(batch, dtype=np.int64)
        self.row: int | None = None
        self.shared: dict = {}

    def begin(self, starts: np.ndarray | int, row: int | None = None, shared: dict | None = None) -> None:
        """The next write: every row at its ``starts[b]``, or row ``row`` alone at ``starts``;
        ``shared``: what every layer of one forward computes alike."""
        self.row = row
        self.starts = np.asarray(starts, dtype=np.int64).reshape(-1)
        self.shared = {} if shared is None else shared

    def _reserve(self, k: torch.Tensor, end: int) -> None:
        if self.keys is None:
            shape = (self.batch, k.shape[1], max(self.capacity, end), k.shape[3])
            # zeroed, never empty: a row's attention also reads the slots past its length (masked),
            # and a NaN left in uninitialised memory survives a zero attention weight
            self.keys, self.values = k.new_zeros(shape), k.new_zeros(shape)
        elif end > self.keys.shape[2]:  # a caller's underestimate: reallocate once, doubling
            size = max(end, 2 * self.keys.shape[2])
            for name in ("keys", "values"):
                old = getattr(self, name)
                new = old.new_zeros((*old.shape[:2], size, old.shape[3]))
                new[:, :, : old.shape[2]] = old
                setattr(self, name, new)
        self.capacity = self.keys.shape[2]

    def append(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write ``k``/``v`` (``[B or 1, heads, T, head_dim]``) where ``begin`` said; return every slot
        up to the furthest write."""
        t = k.shape[2]
        # what every layer of this forward computes alike, computed by the first
        end, uniform = self.shared.get(("end", t)) or self.shared.setdefault(
            ("end", t), (int(self.starts.max()) + t, bool((self.starts == self.starts[0]).all())))
        self._reserve(k, end)
        if self.row is not None or uniform:  # one row, or one start (batch 1 above all): a slice, no index
            rows, start = slice(None) if self.row is None else slice(self.row, self.row + 1), int(self.starts[0])
            self.keys[rows, :, start:end] = k
            self.values[rows, :, start:end] = v
            return self.keys[rows, :, :end], self.values[rows, :, :end]
        index = self.shared.get(("index", k.shape))
        if index is None:
            slots = torch.as_tensor(self.starts, device=k.device)[:, None] + torch.arange(t, device=k.device)
            index = self.shared["index", k.shape] = slots[:, None, :, None].expand(-1, k.shape[1], -1, k.shape[3])
        self.keys.scatter_(2, index, k)
        self.values.scatter_(2, index, v)
        return self.keys[:, :, :end], self.values[:, :, :end]

    def keep(self, b: int, start: int, rows: torch.Tensor) -> None:
        """Row ``b`` keeps ``rows`` of its slots from ``start`` on (``move_rows``)."""
        if self.keys is None:
            return
        move_rows(self.keys[b], start, rows)  # row b's view: [heads, slots, head_dim]
        move_rows(self.values[b], start, rows)


class RowSlotLayer(DynamicLayer):
    """``RowSlots`` behind the Hugging Face cache-layer interface."""

    def __init__(self, slots: RowSlots) -> None:
        super().__init__()
        self.slots = slots

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
               ) -> tuple[torch.Tensor, torch.Tensor]:
        self.is_initialized = True
        self.keys, self.values = self.slots.append(key_states, value_states)
        return self.keys, self.values

    def get_seq_length(self) -> int:  # positions and masks come from the caller, never from here
        return 0


class RowSlotCache(Cache):
    """One ``RowSlots`` per decoder layer of ``model``."""

    def __init__(self, model: torch.nn.Module, batch: int, capacity: int) -> None:
        config = model.config.get_text_config(decoder=True) if hasattr(model.config, "get_text_config") \
            else model.config
        self.slots = [RowSlots(batch, capacity) for _ in range(config.num_hidden_layers)]
        super().__init__(layers=[RowSlotLayer(s) for s in self.slots])

    def begin(self, starts: np.ndarray | int, row: int | None = None) -> None:
        shared: dict = {}
        for s in self.slots:
            s.begin(starts, row, shared)

    def keep(self, b: int, start: int, rows: torch.Tensor) -> None:
        for s in self.slots:
            s.keep(b, start, rows)


def rows_mask(n_keys: int, context: np.ndarray, visible: list[np.ndarray | None], starts: np.ndarray,
              queries: int, dtype: torch.dtype, device: torch.device,
              blocks: np.ndarray | None = None) -> torch.Tensor:
    """The additive ``[B, 1, queries, n_keys]`` mask of a padded batch forward: row ``b``'s real
    queries see its first ``context[b]`` slots and what ``visible[b]`` marks from ``blocks[b]``
    on (default: after the context); its padding queries (at ``starts[b] + i``) see only
    themselves, so that no softmax row is empty."""
    blocks = context if blocks is None else blocks
    allowed = np.zeros((len(context), queries, n_keys), dtype=bool)
    for b, vis in enumerate(visible):
        n = 0 if vis is None else vis.shape[0]
        if n:
            allowed[b, :n, : context[b]] = True
            allowed[b, :n, blocks[b]: blocks[b] + vis.shape[1]] = vis
        pad = np.arange(n, queries)
        allowed[b, pad, starts[b] + pad] = True
    mask = torch.zeros(allowed.shape, dtype=dtype)
    mask.masked_fill_(~torch.from_numpy(allowed), torch.finfo(dtype).min)
    return mask[:, None].to(device)


def causal(n: int) -> np.ndarray:
    """A block of ``n`` new tokens that each see themselves and those before them."""
    return np.tril(np.ones((n, n), dtype=bool))


def padded(rows: dict[int, np.ndarray], batch: int, width: int) -> np.ndarray:
    """Each row's values from column 0, zeros after them: a ``[batch, width]`` batch."""
    out = np.zeros((batch, width), dtype=np.int64)
    for b, values in rows.items():
        out[b, : len(values)] = values
    return out
