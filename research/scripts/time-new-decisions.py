"""Adds to shipped profiles the decision times of baseline families newer than them.

``validate --simulated`` and ``train`` time such a family on every run (``sim.evaluate.method_set``:
"measured now on this machine"), which costs a second or more per run and gives a run-to-run
different charge. This script times them once, exactly as that path does
(``policy_latency_by_depth`` at the traces' depths, 200 repeats), and stores the result in the
profile's ``policy_seconds_by_depth``; the families the profile timed when it was calibrated keep
their entries. Run it alone on the machine the profiles' timings came from (an AMD EPYC, family 25
model 17); docs/results/calibration.md says when it last ran.

    .venv/bin/python research/scripts/time-new-decisions.py calibration/*/
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from simspec.errors import SimspecError
from simspec.policies.registry import BASELINE_REGISTRY, timing_policies
from simspec.policies.timing import policy_latency_by_depth
from simspec.sim.evaluate import decision_charges
from simspec.sim.profile import load_profile


def add_missing(folder: Path) -> list[str]:
    """Times the families ``folder``'s profile has no charge for; returns their names."""
    try:
        profile = load_profile(folder)
        traces = profile.traces()
    except SimspecError:
        return []  # a traces folder, or curves without traces: nothing replays on it
    charged = decision_charges(profile.meta)
    timed = timing_policies(profile.cost, traces.width, traces.depth_max)
    missing = {s.name: timed[s.name] for s in BASELINE_REGISTRY.specs()
               if s.name not in charged and s.name in timed}
    if not missing:
        return []
    by_depth = policy_latency_by_depth(missing, traces.width, traces.depth_max, 200)
    path = folder / "profile.json"
    data = json.loads(path.read_text())
    data["policy_seconds_by_depth"] = {**(data.get("policy_seconds_by_depth") or {}), **by_depth}
    path.write_text(json.dumps(data, indent=1))  # as calibrate writes it
    return sorted(missing)


def main(folders: list[str]) -> None:
    for folder in folders:
        added = add_missing(Path(folder))
        print(f"{folder}: {', '.join(added) or 'nothing to add'}")


if __name__ == "__main__":
    main(sys.argv[1:])
