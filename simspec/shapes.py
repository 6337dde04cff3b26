"""The compiled runtime's shape rule, shared by the engine and the cost model: a forward of n tokens
runs as one of the next power of two (numpy only)."""

from __future__ import annotations

import numpy as np


def next_power_of_two(n):
    """The smallest power of two at or above each ``n`` (at least 1): an int for an int, else floats."""
    out = np.exp2(np.ceil(np.log2(np.maximum(np.asarray(n, dtype=float), 1.0))))
    return int(out) if isinstance(n, (int, np.integer)) else out
