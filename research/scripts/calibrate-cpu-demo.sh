#!/usr/bin/env bash
# docs/results/calibration.md#calibration-of-the-epyc: record the HumanEval draft-tree traces of the shipped
# EAGLE-3 head (715 s on the Xeon; no timing, may share the machine), then this machine's
# latency curves (190 s on the EPYC; run them alone).
# Writes calibration/traces-humaneval-eagle/, calibration/cpu-demo/ and figures/curves-cpu-demo.png;
# the folders ship (FORCE=--force replaces them). The shipped policies and validation runs name
# the profile's hash: retrain them (train-policies.sh) after replacing it.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
simspec calibrate --traces-only --n-prompts 164 --max-new-tokens 128 --check-prompts 4 \
    --out calibration/traces-humaneval-eagle --json ${FORCE:-}
simspec calibrate --gpu cpu --traces-from calibration/traces-humaneval-eagle --out calibration/cpu-demo --json ${FORCE:-}
simspec plot curves --profile calibration/cpu-demo --force
