"""Issue 49's information bound on a profile's held-out traces (median speedup over prompts, every
recorded token, and each as a share of the hindsight oracle's):

- oracle: every cycle's (D, V) chosen knowing what the target accepts;
- bound, path known: the full-tree Bayes decision (``simspec.sim.bound``) told which nodes lie on
  the greedy path: how near the oracle the bound's machinery comes with full knowledge;
- bound, node scores: the same decision, seeing the whole drafted tree for free, from a node
  classifier fitted on the held-out prompts themselves (in sample), lambda picked on them too;
  and the same with the classifier fitted on the train split;
- bound, node scores + history: the same, each node's features joined by the cycle's history (the
  prompt's recent acceptance under the bound's own decisions, and the context length), the
  classifier fitted on the cycles the node-score bound visits (in sample, and on train);
- bayes: the Bayes rule as a policy (level by level, paying for each level), tuned on train;
- imitation: behaviour cloning of the oracle's choices (``simspec.sim.imitation``);
- the grid best and any learned policies given.

    .venv/bin/python research/scripts/information-bound.py calibration/cpu-demo policies/ltd-cpu-demo \
        policies/radar-cpu-demo > research/runs/findings/information-bound/cpu-demo.json
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
from imitation import fit_imitation, oracle_cycles  # research/scripts/imitation.py, beside this script

from simspec.policies.artifact import load_policy
from simspec.policies.rules.bayes import KAPPAS, BayesTree
from simspec.sim.bound import (
    full_tree_bayes,
    history_bound,
    history_predictor,
    information_bound,
    perfect_probabilities,
)
from simspec.sim.evaluate import grid_best, split_traces
from simspec.sim.labels import WHOLE_TREE, fit_node_predictor
from simspec.sim.oracle import oracle
from simspec.sim.profile import load_profile
from simspec.sim.replay import replay


def main(profile_path: str, policy_paths: list[str]) -> None:
    profile = load_profile(profile_path)
    traces, cost = profile.traces(), profile.cost
    train, held = split_traces(traces, "train"), split_traces(traces, "heldout")
    started = time.perf_counter()
    rows = {"oracle": oracle(held, cost).speedup}
    known = {k: full_tree_bayes(held, cost, perfect_probabilities(held), k)[0] for k in (2.0, 3.0, 4.0)}
    rows["bound, path known"] = max(known.values(), key=np.median)
    held_predictor = fit_node_predictor(held, WHOLE_TREE)
    in_sample = information_bound(held, cost, held_predictor)
    rows["bound, node scores (in sample)"] = in_sample.speedup
    tree_predictor = fit_node_predictor(train, WHOLE_TREE)
    rows["bound, node scores (train fit)"] = information_bound(held, cost, tree_predictor).speedup
    in_history = history_bound(held, cost, history_predictor(held, cost, held_predictor, in_sample.kappa))
    rows["bound, node scores + history (in sample)"] = in_history.speedup
    train_kappa = information_bound(train, cost, tree_predictor).kappa
    rows["bound, node scores + history (train fit)"] = history_bound(
        held, cost, history_predictor(train, cost, tree_predictor, train_kappa)).speedup
    bayes = max((BayesTree(tree_predictor, cost, k, traces.width, traces.depth_max) for k in KAPPAS),
                key=lambda p: float(np.mean(replay(train, cost, p).speedup)))
    rows[bayes.name] = replay(held, cost, bayes).speedup
    imitation = fit_imitation(train, cost)
    rows[imitation.name] = replay(held, cost, imitation).speedup
    grid = grid_best(train, cost, None)
    rows[grid.name] = replay(held, cost, grid).speedup
    for path in policy_paths:
        policy, _ = load_policy(path)
        rows[path] = replay(held, cost, policy).speedup
    cycles = oracle_cycles(held, cost)
    top = float(np.median(rows["oracle"]))
    print(json.dumps({
        "profile": profile_path, "device": profile.meta.device, "heldout_prompts": held.n_prompts,
        "seconds": round(time.perf_counter() - started, 1),
        "oracle_cycles": {"count": len(cycles.at), "depth_histogram": np.bincount(cycles.depth).tolist(),
                          "share_drafting_nothing": float(np.mean(cycles.depth == 1)),
                          "share_verifying_exactly_the_accepted": float(np.mean(cycles.size == cycles.accepted + 1))},
        "bound_in_sample": {"kappa": in_sample.kappa, "depth_histogram": in_sample.depths.tolist()},
        "bound_with_history_in_sample": {"kappa": in_history.kappa, "depth_histogram": in_history.depths.tolist()},
        "rows": [{"method": k, "speedup": float(np.median(v)), "q25": float(np.percentile(v, 25)),
                  "q75": float(np.percentile(v, 75)), "share_of_oracle": float(np.median(v)) / top}
                 for k, v in rows.items()]}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
