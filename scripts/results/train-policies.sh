#!/usr/bin/env bash
# docs/results.md#trained-policies: LTD, Re-SpS (standard and max-entropy) and RADAR, preset
# paper, against calibration/cpu-demo, then scored in the simulator on the held-out traces.
# LTD took 1,809 s (fp32), the others 68-101 s each, on the reference machine. The shipped RADAR and Re-SpS runs used 1 torch thread.
# Writes policies/{ltd,resps,resps-maxent,radar}-cpu-demo/ (they ship: FORCE=--force replaces
# them), real/bench/validate-sim-cpu-demo-policies.txt and figures/training-*-cpu-demo.png.
# LTD trains its trunks in bf16 where the CPU has native bf16 (--precision auto); the shipped
# policy is fp32: PRECISION=fp32 gives that.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
simspec train --simulated --profile calibration/cpu-demo --algo ltd --precision "${PRECISION:-auto}" --json ${FORCE:-}
simspec train --simulated --profile calibration/cpu-demo --algo resps --threads 1 --json ${FORCE:-}
simspec train --simulated --profile calibration/cpu-demo --algo resps --variant maxent --threads 1 --json ${FORCE:-}
simspec train --simulated --profile calibration/cpu-demo --algo radar --threads 1 --json ${FORCE:-}
for name in ltd resps resps-maxent radar; do
  simspec plot training --policy "policies/$name-cpu-demo"
done
simspec validate --simulated --profile calibration/cpu-demo --json \
    --policies policies/ltd-cpu-demo,policies/resps-cpu-demo,policies/resps-maxent-cpu-demo,policies/radar-cpu-demo \
    | tee real/bench/validate-sim-cpu-demo-policies.txt
