#!/usr/bin/env bash
# docs/results/validation.md#real-validation-on-the-in-situ-profile (the README's headline table):
# refit calibration/cpu-demo in situ on 8 train prompts, then every baseline and the 4 shipped
# policies (13 methods) x 40 held-out HumanEval prompts on the real engine beside the
# simulator's prediction. ~40 min on the EPYC (recalibrate ~220 s, validate ~35 min). Writes
# calibration/cpu-demo-insitu/ and research/runs/validate-cpu-demo-insitu-humaneval40/; both ship, so
# run with FORCE=--force to replace them. Run it alone: it measures time.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
simspec recalibrate --profile calibration/cpu-demo --out calibration/cpu-demo-insitu --json ${FORCE:-}
simspec validate --real --profile calibration/cpu-demo-insitu \
    --policies policies/ltd-cpu-demo,policies/radar-cpu-demo,policies/resps-cpu-demo,policies/resps-maxent-cpu-demo \
    --n-prompts 40 --max-new-tokens 48 --out research/runs/validate-cpu-demo-insitu-humaneval40 --json ${FORCE:-}
simspec plot validation --report research/runs/validate-cpu-demo-insitu-humaneval40 --force
