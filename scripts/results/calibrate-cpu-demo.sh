#!/usr/bin/env bash
# docs/results.md#calibration-of-the-reference-cpu: record the HumanEval draft-tree traces
# (1,769 s; no timing, may share the machine), then this machine's latency curves (201 s;
# run them alone).
# Writes calibration/traces-humaneval-eagle/, calibration/cpu-demo/ and figures/curves-cpu-demo.png;
# the folders ship (FORCE=--force replaces them). The shipped policies and validation runs name
# the profile's hash: retrain them (train-policies.sh) after replacing it.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
simspec calibrate --traces-only --n-prompts 164 --max-new-tokens 128 --check-prompts 20 \
    --out calibration/traces-humaneval-eagle --json ${FORCE:-}
simspec calibrate --gpu cpu --traces-from calibration/traces-humaneval-eagle --out calibration/cpu-demo --json ${FORCE:-}
simspec plot curves --profile calibration/cpu-demo
