#!/usr/bin/env bash
# docs/results/validation.md#simulator-fidelity-by-prompt-domain: every baseline and the 4 shipped policies on
# 8 held-out ShareGPT and 8 held-out HumanEval prompts, each predicted by the shipped profile
# refitted in the same process on 8 train prompts of the same set (--recalibrate); three passes,
# each prompt's speedup the median over them (one pass's per-prompt error spread 5-24 %: single
# runs on this shared VM hiccup). ~40 min per set on the EPYC (the dense in-situ ladder: every V
# to 12, and the co-timed refit). Each run keeps every timed cycle in cycles.npz; cut it with
# research/scripts/cycle-residuals.py. Writes research/runs/fidelity-{sharegpt,humaneval}8/ (ship:
# FORCE=--force replaces them; TAG=x writes research/runs/fidelity-x-{sharegpt,humaneval}8/; SETS=sharegpt
# runs one set; REPEATS=6 runs six passes: 79 min for HumanEval on the EPYC-Z4, the co-timed
# ladder timing every method's own point each step; REPEATS=10: 124 min; EXTRA=--allow-other-device
# on a machine other than the profile's, which the in-situ refit then re-measures). Run it alone:
# it measures time.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
for prompts in ${SETS:-sharegpt humaneval}; do
  simspec validate --real --profile calibration/cpu-demo --recalibrate --prompts "$prompts" --n-prompts 8 \
      --max-new-tokens 64 --repeats "${REPEATS:-3}" \
      --policies policies/ltd-cpu-demo,policies/radar-cpu-demo,policies/resps-cpu-demo,policies/resps-maxent-cpu-demo \
      --out "research/runs/fidelity-${TAG:+$TAG-}${prompts}8" --json ${FORCE:-} ${EXTRA:-}
done
