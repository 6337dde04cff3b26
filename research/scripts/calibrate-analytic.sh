#!/usr/bin/env bash
# docs/results/calibration.md#analytic-profiles: analytic roofline profiles (no GPU needed): the
# demo pair on A100 and H100 naming the shipped traces, and a Llama-3.1-8B-class target (curves
# only). Writes calibration/{a100,h100}-{demo,llama8b}-analytic/ (they ship: FORCE=--force
# replaces them) and figures/curves-*-analytic.png.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
for gpu in a100 h100; do
  simspec calibrate --gpu "$gpu" --traces-from calibration/traces-humaneval-eagle \
      --out "calibration/$gpu-demo-analytic" --json ${FORCE:-}
  simspec calibrate --gpu "$gpu" --target arch:llama-3.1-8b --out "calibration/$gpu-llama8b-analytic" --json ${FORCE:-}
done
simspec plot curves --profile calibration/h100-demo-analytic --force
simspec plot curves --profile calibration/h100-llama8b-analytic --force
simspec plot curves --profile calibration/a100-llama8b-analytic --force
