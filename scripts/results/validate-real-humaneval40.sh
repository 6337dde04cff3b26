#!/usr/bin/env bash
# docs/results.md#real-validation-13-methods-calibrated-profile: 9 baselines and the 4 shipped
# policies x 40 held-out HumanEval prompts on the real engine, with the profile as calibrate
# measured it. ~32 min on the reference machine. Writes real/validate-cpu-demo-humaneval40/
# (ships: run with FORCE=--force to replace it).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
simspec validate --real --profile calibration/cpu-demo \
    --policies policies/ltd-cpu-demo,policies/radar-cpu-demo,policies/resps-cpu-demo,policies/resps-maxent-cpu-demo \
    --n-prompts 40 --max-new-tokens 48 --out real/validate-cpu-demo-humaneval40 --json ${FORCE:-}
simspec plot validation --report real/validate-cpu-demo-humaneval40
