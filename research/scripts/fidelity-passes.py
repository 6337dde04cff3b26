"""docs/results/validation.md#simulator-fidelity-by-prompt-domain: how many passes a greedy `validate --real`
run needs. From the run's own timed runs (RUN/cycles.npz: every plain and speculative run's total,
in the order they ran) it rebuilds each method's speedup per (pass, prompt) — the plain run of the
same slot over the method's — and scores the simulator's predictions (report.json: under the upfront
and the co-timed refit; deterministic at T = 0, so the same for every subset) against the first k
passes, for every k, and against each half of the passes. Per k it also prints the error an exact
simulator would still show against runs that noisy (`measurement_noise`: the pass-to-pass standard
error of each method's median over prompts). Times nothing and loads no model.

    .venv/bin/python research/scripts/fidelity-passes.py RUN
"""
import sys
from pathlib import Path

import numpy as np
from runs import read_json

from simspec.report.validation import measurement_noise

run = Path(sys.argv[1])
report = read_json(run / "report.json")
t = np.load(run / "cycles.npz")
if report.get("temperature", 0) > 0:
    sys.exit(f"{run}: sampled (T > 0) runs draw other text each pass; this rebuild is for greedy runs")
if "run_total" not in t.files:
    sys.exit(f"{run}: cycles.npz predates per-run totals (run_total); rerun the fidelity command")
methods, phases = list(t["methods"]), list(t["phases"])
rows = report["rows"]
names = [r["method"] for r in rows]
passes, prompts = report["repeats"], report["n_prompts"]
scored = t["run_phase"] == phases.index("scored")
slot_method = t["run_method"][scored].reshape(passes, prompts, len(rows) + 1)
slot_total = t["run_total"][scored].reshape(passes, prompts, len(rows) + 1)

# speedup[method, pass, prompt]: plain decoding's time over the method's, in the same slot
speedup = np.empty((len(rows), passes, prompts))
for a in range(passes):
    for b in range(prompts):
        slot = [methods[m] for m in slot_method[a, b]]
        plain = next(j for j, name in enumerate(slot) if name not in names)
        for k, name in enumerate(names):
            speedup[k, a, b] = slot_total[a, b, plain] / slot_total[a, b, slot.index(name)]
for k, row in enumerate(rows):  # the rebuild must reproduce the report's own per-pass medians
    assert np.allclose(np.median(speedup[k], axis=1), row["repeat_medians"]), row["method"]
upfront = np.array([r["speedup_sim"] for r in rows])
co_timed = report.get("co_timed_refit")
co_timed = None if co_timed is None else np.array([
    next(c["speedup_sim"] for c in co_timed["rows"] if c["method"] == n) for n in names])


def errors(sim: np.ndarray, real: np.ndarray) -> str:
    e = np.abs(sim / real - 1)
    return f"{e.mean():.1%} / {e.max():.1%}"


print(f"{run}: {len(rows)} methods, {prompts} prompts, {passes} passes; mean / max |error| of each refit's "
      "prediction against the passes named")
print(f"{'passes':>12} {'upfront refit':>15} {'co-timed refit':>15} {'exact model vs this noise':>27}")
for label, which in ([(f"first {k}", list(range(k))) for k in range(1, passes + 1)]
                     + [("first half", list(range(passes // 2))), ("second half", list(range(passes // 2, passes)))]):
    real = np.median(np.median(speedup[:, which], axis=1), axis=1)  # per prompt over passes, then over prompts
    noise = measurement_noise([{"method": n, "repeat_medians": list(np.median(speedup[k, which], axis=1))}
                               for k, n in enumerate(names)])
    floor = (f"{noise['exact_model_mean_abs_rel_error']:.1%} / {noise['exact_model_max_abs_rel_error']:.1%}"
             if noise else "-")
    print(f"{label:>12} {errors(upfront, real):>15} {errors(co_timed, real) if co_timed is not None else '-':>15} "
          f"{floor:>27}")
