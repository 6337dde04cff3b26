#!/usr/bin/env bash
# docs/results/training.md#trained-policies: LTD (preset fast), Re-SpS (standard and max-entropy) and
# RADAR (preset paper) against calibration/cpu-demo, then scored in the simulator on the
# held-out traces. The shipped LTD policy is the fast preset (168 s on the EPYC); its paper
# schedule (LTD_PRESET=paper, ten times the steps) takes 23-30 min on the Xeon.
# Writes policies/{ltd,resps,resps-maxent,radar}-cpu-demo/ (they ship: FORCE=--force replaces
# them), research/runs/bench/validate-sim-cpu-demo-policies.txt and figures/training-*-cpu-demo.png.
# LTD trains its trunks in bf16 where the CPU has native bf16 (--precision auto), else fp32.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
simspec train --simulated --profile calibration/cpu-demo --algo ltd --preset "${LTD_PRESET:-fast}" \
    --precision "${PRECISION:-auto}" --out policies/ltd-cpu-demo --json ${FORCE:-}
simspec train --simulated --profile calibration/cpu-demo --algo resps --threads 1 --json ${FORCE:-}
simspec train --simulated --profile calibration/cpu-demo --algo resps --variant maxent --threads 1 --json ${FORCE:-}
simspec train --simulated --profile calibration/cpu-demo --algo radar --threads 1 --json ${FORCE:-}
for name in ltd resps resps-maxent radar; do
  simspec plot training --policy "policies/$name-cpu-demo" --force
done
simspec validate --simulated --profile calibration/cpu-demo --json \
    --policies policies/ltd-cpu-demo,policies/resps-cpu-demo,policies/resps-maxent-cpu-demo,policies/radar-cpu-demo \
    | tee research/runs/bench/validate-sim-cpu-demo-policies.txt
