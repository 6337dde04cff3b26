#!/usr/bin/env bash
# docs/results/calibration.md#cost-model-fit-per-runtime: this machine's curves under each runtime (eager
# about 3 min, compiled about 17 min, most of it compiling), then each profile's held-out
# errors per curve. Run it alone: it measures time. Writes OUT/eager and OUT/compiled
# (OUT defaults to /tmp/calibration-fit).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
OUT=${OUT:-/tmp/calibration-fit}
for runtime in eager compiled; do
    simspec calibrate --gpu cpu --runtime $runtime --traces-from calibration/traces-humaneval-eagle --check-prompts 0 \
        --out "$OUT/$runtime" --force --json | tail -1
done
python research/scripts/calibration-fit.py "$OUT/eager" "$OUT/compiled"
