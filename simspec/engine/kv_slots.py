"""Moving a verified tree's accepted path into place in a static KV cache (``kv_rows``), and the
slack every speculative cache keeps for a tree."""

from __future__ import annotations

import torch

# Slots allocated beyond a sequence's known tokens: the largest tree a cycle verifies (a larger
# one, or a sequence longer than its caller said, reallocates the cache once, correctly)
TREE_SLOTS = 512


def move_rows(buffer: torch.Tensor, start: int, rows: torch.Tensor, source: int | None = None) -> None:
    """Of ``buffer``'s slots (dimension -2) from ``source`` on (default ``start``), copy ``rows``
    (ascending offsets) to ``start``, ``start + 1``, ...: an accepted path moved into place.
    index_select copies first, so a row moving onto a slot another row still has to leave is
    read before it is overwritten."""
    buffer[..., start:start + len(rows), :] = buffer.index_select(-2, (start if source is None else source) + rows)
