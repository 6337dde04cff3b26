"""docs/findings.md, seed 003 Tab. 2: what lies behind the select row of draft-selection.sh.
Per drafter and domain of the held-out mixed prompts: measured single-token accuracy alpha,
the draft/target cost ratio c, seed 003's Eq. 4 speedup at the best window, the replayed speedup
of the drafter's grid-best tree, and how often each drafter is the hindsight best. Writes
research/runs/findings/selection.json. Run after research/scripts/draft-selection.sh (seconds, numpy only)."""

import json
import sys
from pathlib import Path

import numpy as np

from simspec.sim.profile import load_profile
from simspec.sim.selection import Drafter, align, chain_speedup, compare, cost_ratio, single_token_accuracy

names = {"eagle": "calibration/cpu-mix-eagle", "lm": "calibration/cpu-mix-lm",
         "target-layers:6": "calibration/cpu-mix-tl6"}
profiles = {n: load_profile(p) for n, p in names.items()}
main = profiles["eagle"].traces()
drafters = [Drafter(n, names[n], main if n == "eagle" else align(main, p.traces(), names[n]), p.cost)
            for n, p in profiles.items()]
splits = np.array(main.meta["splits"])
train, held = np.flatnonzero(splits == "train"), np.flatnonzero(splits == "heldout")
found = compare(drafters, train, held, None)
domain = np.array([pid.split("/")[0] for pid in main.meta["prompt_ids"]])[held]
context = float(np.median(main.context_length))
out = {"heldout_prompts": int(len(held)), "context_median": context, "drafters": {}}
for i, d in enumerate(drafters):
    alpha = single_token_accuracy(d.traces)[held]
    c = cost_ratio(d.cost, d.traces.width, context)
    row = {"cost_ratio": c, "tree": found.trees[i], "chosen": int(np.sum(found.chosen == i))}
    for dom in ("humaneval", "sharegpt"):
        at = domain == dom
        row[dom] = {"alpha": float(alpha[at].mean()),
                    "eq4_speedup": float(chain_speedup(alpha[at], np.full(at.sum(), c)).mean()),
                    "replay_speedup_mean": float(found.results[i].speedup[at].mean()),
                    "hindsight_best": int(np.sum(found.hindsight[at] == i))}
    out["drafters"][d.name] = row
for label, choice in (("fixed", np.full(len(held), found.fixed)), ("select", found.chosen),
                      ("hindsight", found.hindsight)):
    s = found.pick(choice).speedup
    out[label] = {"mean": float(s.mean()), "median": float(np.median(s)),
                  "by_domain": {dom: float(s[domain == dom].mean()) for dom in ("humaneval", "sharegpt")}}
Path("research/runs/findings").mkdir(parents=True, exist_ok=True)
Path("research/runs/findings/selection.json").write_text(json.dumps(out, indent=1))
json.dump(out, sys.stdout, indent=1)
