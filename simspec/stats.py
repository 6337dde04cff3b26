"""Small numpy statistics shared by the simulator, the policies and the measurements."""

from __future__ import annotations

import numpy as np


def robust_median(samples: np.ndarray) -> float:
    """Median after dropping samples more than 5 MADs above it (a shared machine's hiccups;
    only slow outliers exist, nothing runs faster than the hardware allows)."""
    samples = np.asarray(samples, dtype=float)
    med = np.median(samples)
    mad = np.median(np.abs(samples - med)) or 1e-12
    return float(np.median(samples[samples <= med + 5 * mad]))
