#!/usr/bin/env bash
# docs/results/calibration.md#latency-of-the-target-and-the-drafts: target forward vs V and L, and the
# stand-in draft target-layers:4 vs W and L; median and IQR of 7 runs after 2 warm-ups (run it
# alone: it measures time). Writes research/runs/bench/latency-cpu.json (the JSON line, indented).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
simspec latency --draft target-layers:4 --json | tail -n 1 | python3 -m json.tool --indent 1 > research/runs/bench/latency-cpu.json
