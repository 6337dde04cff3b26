"""What choosing the tree with a model costs when the measured curves are the truth.

Each profile picks its best static tree (``simspec tune``: chosen on the traces' train prompts);
every choice is then replayed on the held-out prompts priced by the *reference* profile (the
measured curves). Prints, in markdown: chooser, its tree, the speedup it predicts for it, and the
speedup that tree gets under the reference curves, beside the reference's own best.

    python scripts/gpu/tree-choice.py --reference calibration/h200-demo-graph \
        calibration/h200-demo-analytic calibration/h200-demo-eager
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from simspec.policies.base import StaticPolicy  # noqa: E402
from simspec.sim.profile import load_profile  # noqa: E402
from simspec.sim.replay import replay  # noqa: E402
from simspec.sim.tune import TuneRequest, run  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", required=True)
    parser.add_argument("choosers", nargs="+")
    args = parser.parse_args()
    ref = load_profile(args.reference)
    traces = ref.traces()
    held = traces.subset(np.flatnonzero(np.array(traces.meta["splits"]) == "heldout"))

    def under_reference(depth: int, size: int) -> tuple[float, float, float]:
        speedup = replay(held, ref.cost, StaticPolicy(depth, traces.width, size), None).speedup
        return float(np.mean(speedup)), *map(float, np.percentile(speedup, [25, 75]))

    print(f"Held-out prompts priced by `{args.reference}` (mean speedup [IQR]):\n")
    print("| tree chosen with | tree (D, V) | its own prediction | under the reference curves |")
    print("| --- | --- | ---: | ---: |")
    for chooser in [args.reference, *args.choosers]:
        tuned = run(TuneRequest(profile=chooser)).summary
        mean, q25, q75 = under_reference(tuned["depth"], tuned["size"])
        print(f"| `{chooser}` | {tuned['depth']}, {tuned['size']} | {tuned['speedup']:.3f} | "
              f"{mean:.3f} [{q25:.2f}–{q75:.2f}] |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
