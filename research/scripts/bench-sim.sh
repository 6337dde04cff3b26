#!/usr/bin/env bash
# docs/results/calibration.md#replay-throughput: replay throughput of static D 8 V 60 over 200 copies of the
# 164 HumanEval traces, one core. Writes research/runs/bench/bench-sim-cpu-demo.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
simspec bench-sim --profile calibration/cpu-demo --json | tee research/runs/bench/bench-sim-cpu-demo.txt
