#!/usr/bin/env bash
# docs/results.md#sampling-at-t--1-in-the-simulator: the T = 1 profile, its policies and the
# simulator's view of them. Traces: 40 HumanEval prompts sampled at T = 1 with node
# probabilities for V <= 64 (RECORD=1 re-records them: ~37 min on the EPYC); the profile's latency
# curves are measured on this machine (~3 min: run it alone, it measures time). Then RADAR (paper
# preset) and LTD (fast) trained on the T = 1 replay, every baseline and policy scored in the
# simulator (LTD trained at T = 0 beside LTD trained at T = 1), and replay throughput at T = 1.
# Writes calibration/cpu-demo-T1/, policies/{radar,ltd}-cpu-demo-T1/ (they ship: FORCE=--force
# replaces them) and research/runs/bench/{validate-sim,bench-sim}-cpu-demo-T1.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
if [[ -n "${RECORD:-}" ]]; then
  simspec calibrate --traces-only --temperature 1 --n-prompts 40 --out calibration/traces-humaneval-eagle-T1 ${FORCE:-}
fi
simspec calibrate --gpu cpu --temperature 1 --traces-from calibration/traces-humaneval-eagle-T1 \
    --out calibration/cpu-demo-T1 --json ${FORCE:-}
simspec train --simulated --profile calibration/cpu-demo-T1 --algo radar --threads 1 --json ${FORCE:-}
simspec train --simulated --profile calibration/cpu-demo-T1 --algo ltd --preset fast --out policies/ltd-cpu-demo-T1 --json ${FORCE:-}
for name in radar ltd; do
  simspec plot training --policy "policies/$name-cpu-demo-T1" --force
done
simspec validate --simulated --profile calibration/cpu-demo-T1 --temperature 1 --json \
    --policies policies/ltd-cpu-demo,policies/ltd-cpu-demo-T1,policies/radar-cpu-demo,policies/radar-cpu-demo-T1 \
    | tee research/runs/bench/validate-sim-cpu-demo-T1.txt
simspec bench-sim --profile calibration/cpu-demo-T1 --temperature 1 --json | tee research/runs/bench/bench-sim-cpu-demo-T1.txt
