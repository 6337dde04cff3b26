#!/usr/bin/env bash
# docs/results.md#ltd-vs-grid-best-vs-eagle-3-three-passes: LTD, the grid best and EAGLE-3's
# tree x the same 40 held-out HumanEval prompts, three passes. ~31 min on the reference machine.
# Writes real/validate-cpu-demo-humaneval40-ltd-grid-3passes/ (ships: FORCE=--force replaces it).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
simspec validate --real --profile calibration/cpu-demo --baselines eagle3,grid \
    --policies policies/ltd-cpu-demo --n-prompts 40 --max-new-tokens 48 --repeats 3 \
    --out real/validate-cpu-demo-humaneval40-ltd-grid-3passes --json ${FORCE:-}
