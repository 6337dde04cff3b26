#!/usr/bin/env bash
# docs/results.md#real-validation-on-the-in-situ-profile (the README's headline table):
# refit calibration/cpu-demo in situ on 8 train prompts, then 9 methods x 40 held-out HumanEval
# prompts on the real engine beside the simulator's prediction. ~24 min on the reference machine
# (recalibrate 218 s, validate 1,218 s). Writes calibration/cpu-demo-insitu/ and
# real/validate-cpu-demo-insitu-humaneval40/; both ship, so run with FORCE=--force to replace them.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
simspec recalibrate --profile calibration/cpu-demo --out calibration/cpu-demo-insitu --json ${FORCE:-}
simspec validate --real --profile calibration/cpu-demo-insitu \
    --baselines eagle3,grid,ddd,svip,gammatune,analytic,fsm,cachefsm --policies policies/ltd-cpu-demo \
    --n-prompts 40 --max-new-tokens 48 --out real/validate-cpu-demo-insitu-humaneval40 --json ${FORCE:-}
