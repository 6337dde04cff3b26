"""Issue 49, parts 3 and 4 in the simulator: one Bayes rule across batch sizes and across machines.

The rule's node classifier is fitted once, on the train split of the shipped HumanEval traces;
its rate is the sequence's own (``bayes(auto)``: nothing tuned), or the one tuned on ``cpu-demo``
and carried. It then reads whatever curves it is given:

- batch sizes: replay at batch B (``simspec.sim.replay``) of the held-out prompts at B = 1, 2, 4, 8
  on ``calibration/cpu-demo-batch``, against the best static tree tuned at each B (as
  ``validate --batch-size B`` tunes it) and SGLang's adaptive rule;
- machines: replay of the held-out prompts on every shipped profile of those traces (this CPU,
  one thread, H200 eager and CUDA-graph, analytic A100/H100), against the grid best tuned on
  ``cpu-demo`` and carried over, the grid best retuned on the machine itself, and LTD trained on
  ``cpu-demo``.

    .venv/bin/python research/scripts/bayes-transfer.py > research/runs/findings/information-bound/transfer.json
"""

from __future__ import annotations

import json
import time

import numpy as np

from simspec.policies.artifact import load_policy
from simspec.policies.rules.bayes import KAPPAS, BayesTree
from simspec.sim.evaluate import build_baselines, grid_best, split_traces
from simspec.sim.labels import WHOLE_TREE, fit_node_predictor
from simspec.sim.profile import load_profile
from simspec.sim.replay import replay

MACHINES = ("cpu-demo", "cpu-demo-1t", "h200-demo-eager", "h200-demo-graph", "a100-demo-analytic",
            "h100-demo-analytic")


def main() -> None:
    started = time.perf_counter()
    home = load_profile("calibration/cpu-demo")
    traces = home.traces()
    train, held = split_traces(traces, "train"), split_traces(traces, "heldout")
    predictor = fit_node_predictor(train, WHOLE_TREE)
    carried = grid_best(train, home.cost, None)
    ltd, _ = load_policy("policies/ltd-cpu-demo")

    def bayes(cost, kappa=None):
        return BayesTree(predictor, cost, kappa, traces.width, traces.depth_max)

    # the rate tuned on cpu-demo's train split, as the `bayes` baseline tunes it, then carried
    home_kappa = max(KAPPAS, key=lambda k: float(np.mean(replay(train, home.cost, bayes(home.cost, k)).speedup)))

    batches = []
    batched = load_profile("calibration/cpu-demo-batch")
    for b in batched.cost.batch_sizes:
        at_b = batched.cost.at_batch(b)
        static = grid_best(train, at_b, None)
        (sglang,) = build_baselines(["sglang-adaptive"], train, at_b, None)
        rows = {"static, tuned at B": static, sglang.name: sglang, "bayes(auto)": bayes(batched.cost),
                f"bayes(kappa={home_kappa:g}, tuned at B = 1 on cpu-demo)": bayes(batched.cost, home_kappa)}
        batches.append({"batch_size": b, "static": static.name,
                        "speedup": {k: replay(held, batched.cost, p, batch=b).set_speedup for k, p in rows.items()}})

    machines = []
    for name in MACHINES:
        profile = load_profile(f"calibration/{name}")
        cost = profile.cost
        retuned = grid_best(train, cost, None)
        rows = {f"grid best of cpu-demo ({carried.name})": carried, f"grid best retuned ({retuned.name})": retuned,
                "ltd-cpu-demo": ltd, "bayes(auto)": bayes(cost),
                f"bayes(kappa={home_kappa:g} of cpu-demo)": bayes(cost, home_kappa)}
        machines.append({"profile": name, "device": profile.meta.device,
                         "speedup": {k: float(np.median(replay(held, cost, p).speedup)) for k, p in rows.items()}})
    print(json.dumps({"traces": "calibration/traces-humaneval-eagle", "heldout_prompts": held.n_prompts,
                      "classifier": "fitted once on cpu-demo's train split (best 256 nodes per tree)",
                      "statistic": "batches: throughput ratio over the queue; machines: median over prompts",
                      "seconds": round(time.perf_counter() - started, 1), "batches": batches, "machines": machines},
                     indent=1))


if __name__ == "__main__":
    main()
