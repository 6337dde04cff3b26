#!/usr/bin/env bash
# docs/results/validation.md#simulated-validation: every baseline replayed on the 78 held-out HumanEval
# traces with the measured CPU profile and the analytic H100 profile, and the static-tree
# surfaces. Writes research/runs/bench/validate-sim-{cpu-demo,h100-demo-analytic}.txt and
# figures/surface-{cpu-demo,h100-demo-analytic}-heldout.png.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
simspec validate --simulated --profile calibration/cpu-demo --json | tee research/runs/bench/validate-sim-cpu-demo.txt
simspec validate --simulated --profile calibration/h100-demo-analytic --json \
    | tee research/runs/bench/validate-sim-h100-demo-analytic.txt
simspec plot surface --profile calibration/cpu-demo --force
simspec plot surface --profile calibration/h100-demo-analytic --force
