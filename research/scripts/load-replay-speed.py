"""How fast the simulator replays a stream under load (docs/simulator.md#replay-under-load): a
10-minute Poisson stream at 3 requests/s through 8 rows on the shipped batch profile, plain
decoding and a static tree, each replayed 3 times on one core; prints requests, cycles and the
median seconds per replay.

    OMP_NUM_THREADS=1 .venv/bin/python research/scripts/load-replay-speed.py
"""

from __future__ import annotations

import json
import time

import numpy as np

from simspec.policies.base import StaticPolicy
from simspec.sim.evaluate import split_traces
from simspec.sim.load import replay_load
from simspec.sim.profile import load_profile
from simspec.sim.stream import poisson


def main() -> None:
    profile = load_profile("calibration/cpu-demo-batch")
    held = split_traces(profile.traces(), "heldout")
    stream = poisson(3.0, 600, np.arange(held.n_prompts), seed=0)
    for name, make in (("plain", lambda: None), ("static D=4 V=8", lambda: StaticPolicy(4, held.width, 8))):
        times, cycles = [], 0
        for _ in range(3):
            started = time.perf_counter()
            result = replay_load(held, profile.cost, make(), stream, 8, 64)
            times.append(time.perf_counter() - started)
            cycles = result.cycles
        print(json.dumps({"method": name, "requests": len(stream.arrival), "cycles": cycles,
                          "seconds_median": float(np.median(times)), "seconds": [round(t, 3) for t in times]}))


if __name__ == "__main__":
    main()
