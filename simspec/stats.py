"""Small numpy statistics shared by the simulator, the policies and the measurements (scipy
imported where a test needs it)."""

from __future__ import annotations

import numpy as np


def robust_median(samples: np.ndarray) -> float:
    """Median after dropping samples more than 5 MADs above it (a shared machine's hiccups;
    only slow outliers exist, nothing runs faster than the hardware allows)."""
    samples = np.asarray(samples, dtype=float)
    med = np.median(samples)
    mad = np.median(np.abs(samples - med)) or 1e-12
    return float(np.median(samples[samples <= med + 5 * mad]))


def paired_p(a: np.ndarray, b: np.ndarray) -> float | None:
    """Two-sided Wilcoxon signed-rank p-value of paired per-prompt speedups (None: too few
    prompts; 1.0: identical everywhere)."""
    from scipy.stats import wilcoxon

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) < 2:
        return None
    if np.allclose(a, b):
        return 1.0
    return float(wilcoxon(a, b).pvalue)


def gain(a: np.ndarray, b: np.ndarray) -> float:
    """Median over prompts of a's speedup over b's, minus one (paired)."""
    return float(np.median(np.asarray(a) / np.asarray(b)) - 1)


def spearman(x: list[float], y: list[float]) -> float:
    from scipy.stats import spearmanr

    return float("nan") if len(x) < 3 else float(spearmanr(x, y).statistic)


def mean_ci(values: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """Student-t confidence interval of the mean of ``values`` (one value: that value twice)."""
    from scipy import stats

    values = np.asarray(values, dtype=float)
    if len(values) < 2 or np.allclose(values, values[0]):
        return float(values.mean()), float(values.mean())
    low, high = stats.t.interval(level, len(values) - 1, loc=values.mean(), scale=stats.sem(values))
    return float(low), float(high)
