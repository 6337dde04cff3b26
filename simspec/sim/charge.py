"""What the simulator charges a policy per cycle for its decisions.

A rule's decisions cost more the deeper it drafts (``bayes``: 0.8 ms a cycle at depth 2, 7.9 ms at
depth 12 on a 2-core EPYC), so ``calibrate`` times each family at a few depths and a cycle is
charged at its own depth, interpolated; a family timed at one depth is charged that flat.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DecisionCharge:
    depths: tuple[int, ...]  # ascending tree depths (root included) the decisions were timed at
    seconds: tuple[float, ...]  # per cycle at each

    @classmethod
    def flat(cls, seconds: float) -> DecisionCharge:
        return cls((1,), (float(seconds),))

    @classmethod
    def of(cls, by_depth: dict) -> DecisionCharge:
        """From a profile's ``policy_seconds_by_depth`` entry: {"depth": seconds, ...}."""
        pairs = sorted((int(d), float(s)) for d, s in by_depth.items())
        return cls(tuple(d for d, _ in pairs), tuple(s for _, s in pairs))

    def __call__(self, depth) -> np.ndarray:
        """Seconds per cycle at each tree ``depth`` (flat beyond the depths timed)."""
        return np.interp(np.asarray(depth, dtype=np.float64), self.depths, self.seconds)


def as_charge(charge: float | DecisionCharge) -> DecisionCharge:
    return charge if isinstance(charge, DecisionCharge) else DecisionCharge.flat(charge)
