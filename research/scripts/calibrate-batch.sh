#!/usr/bin/env bash
# docs/results.md "Batch size": this machine's latency curves at batch 1, 2, 4 and 8 (verify and
# plain steps of B sequences in one forward, draft steps of B x W nodes) paired with the shipped
# HumanEval traces, then the best static tree per batch size. Run it alone: it measures time.
# Writes calibration/cpu-demo-batch/ (ships; FORCE=--force replaces it).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
[[ -e calibration/cpu-demo-batch/profile.json && -z "${FORCE:-}" ]] ||
    simspec calibrate --gpu cpu --batch-sizes 1,2,4,8 --traces-from calibration/traces-humaneval-eagle \
        --out calibration/cpu-demo-batch --json ${FORCE:-}
for b in 1 2 4 8; do
    simspec tune --profile calibration/cpu-demo-batch --batch-size $b --engine sglang --json | tail -1
done
