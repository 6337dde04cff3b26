"""docs/validation.md#drift-inside-a-run-cycle-by-cycle: does a plain-decoding run cost more or
less after some runs than after others? A `validate --real --recalibrate` run's plain runs
(RUN/cycles.npz), live over the base profile's plain-step curve, grouped by the run that ran
just before each, in the scored phase and in the co-timed ladder.

The scored runs of a slot are recorded in method order; they ran in the order `interleaved`
rotates them to (plain decoding and the methods, rolled by pass + prompt), and after them the
co-timed step of that slot (recorded as it ran). The timeline is rebuilt from that rule.

    .venv/bin/python research/scripts/plain-after.py RUN [PROFILE]

Reads no model and times nothing."""
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from runs import profile as load_profile
from runs import read_json

run = Path(sys.argv[1])
report = read_json(run / "report.json")
base = load_profile(sys.argv[2] if len(sys.argv) > 2 else report["profile"]["path"])
t = np.load(run / "cycles.npz")
phases, methods = list(t["phases"]), list(t["methods"])
if "run_slot" not in t.files:
    sys.exit(f"{run}/cycles.npz predates run slots (*_slot): the timeline cannot be rebuilt")
scored, cotimed = phases.index("scored"), phases.index("co-timed")
policies = [row["method"] for row in report["rows"]]  # the order run_methods ran them in
n_prompts = report["n_prompts"]
step_ratio_ref = np.asarray(base.cost.greedy(t["step_context"]), dtype=float)

# Each run of the two timed phases as (phase, run number within its phase): its method, its
# plain ratio (greedy runs) or its modal verified size (speculative runs).
run_phase, run_method, run_slot = t["run_phase"], t["run_method"], t["run_slot"]
number = np.zeros(len(run_phase), dtype=int)
for p in np.unique(run_phase):
    number[run_phase == p] = np.arange((run_phase == p).sum())
greedy = methods.index("greedy")


def plain_ratio(p: int, r: int) -> float:
    k = (t["step_phase"] == p) & (t["step_run"] == r)
    return t["step_measured"][k].sum() / step_ratio_ref[k].sum()


def modal_size(p: int, r: int) -> int:
    k = (t["cycle_phase"] == p) & (t["cycle_run"] == r)
    return int(np.bincount(t["cycle_size"][k]).argmax()) if k.any() else 0


by_key = {(int(run_phase[i]), int(run_slot[i]), int(run_method[i])): int(number[i])
          for i in range(len(run_phase)) if run_phase[i] == scored}
co_rows = np.flatnonzero(run_phase == cotimed)
timeline = []  # (phase, run number, method name), in the order they ran
for slot in range(int(run_slot[run_phase == scored].max()) + 1):
    rep, p = divmod(slot, n_prompts)
    for k in np.roll(np.arange(len(policies) + 1), -(p + rep)):
        name = "greedy" if k == 0 else policies[k - 1]
        timeline.append((scored, by_key[(scored, slot, methods.index(name))], name))
    for i in co_rows[run_slot[co_rows] == slot]:
        timeline.append((cotimed, int(number[i]), methods[run_method[i]]))

rows = []  # phase, ratio, preceding method, preceding size (0: plain), position in its slot
for j, (p, r, name) in enumerate(timeline):
    if name != "greedy" or j == 0:
        continue
    q, s, before = timeline[j - 1]
    rows.append((p, plain_ratio(p, r), before, 0 if before == "greedy" else modal_size(q, s), q != p))
print(f"{run}: {len(rows)} plain runs after another run; live / base plain step (mean over runs)")
for p in (cotimed, scored):
    mine = [x for x in rows if x[0] == p]
    print(f"\n{phases[p]} phase: {len(mine)} plain runs, mean {np.mean([x[1] for x in mine]):.3f}")
    groups = defaultdict(list)
    for _, ratio, _before, size, crossed in mine:
        label = ("first of its step, after the other phase" if crossed else
                 "after a tree of V >= 32" if size >= 32 else "after a tree of V < 32")
        groups[label].append(ratio)
    for label, ratios in sorted(groups.items()):
        x = np.array(ratios)
        print(f"  {label:<44} {x.mean():.3f} ± {x.std(ddof=1) / np.sqrt(len(x)) if len(x) > 1 else 0:.3f} ({len(x)})")
    sizes = np.array([x[3] for x in mine if not x[4]])
    ratios = np.array([x[1] for x in mine if not x[4]])
    if len(sizes) > 2 and np.ptp(sizes) > 0:
        slope = np.polyfit(np.log(sizes), ratios, 1)[0]
        print(f"  ratio against log(preceding V): slope {slope:+.3f} per e-fold, "
              f"correlation {np.corrcoef(np.log(sizes), ratios)[0, 1]:+.2f}")
