#!/usr/bin/env bash
# docs/results.md "GPU latency curves, measured": what the H200 measurements say, on any machine.
# The measurements themselves need the GPU (each ran once, as one command on a lent H200):
#   python3 scripts/gpu/engine-curves.py --out research/runs/gpu/h200      # simspec's engine, ~5 min
#   python3 scripts/gpu/graph-curves.py --out research/runs/gpu/h200       # CUDA graphs, ~1 min
# This script (no GPU, ~1 min) holds them against the roofline model, turns the demo-shaped
# curves into profiles paired with the shipped HumanEval traces (`calibrate --import-curves`,
# beside the roofline's own H200 profile), asks `tune` for each one's best static tree, and prices
# every choice with the measured CUDA-graph curves (scripts/gpu/tree-choice.py).
# Writes calibration/h200-demo-{graph,eager,analytic}/ (ship; FORCE=--force replaces them).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
python scripts/gpu/compare-analytic.py research/runs/gpu/h200 --gpu h200
traces=calibration/traces-humaneval-eagle
for runtime in graph eager; do
    curves=research/runs/gpu/h200/$([[ $runtime == graph ]] && echo graph-curves || echo curves)-smollm2-135m.json
    [[ -e calibration/h200-demo-$runtime/profile.json && -z "${FORCE:-}" ]] ||
        simspec calibrate --import-curves "$curves" --traces-from $traces --out calibration/h200-demo-$runtime ${FORCE:-}
done
[[ -e calibration/h200-demo-analytic/profile.json && -z "${FORCE:-}" ]] ||
    simspec calibrate --gpu h200 --traces-from $traces --out calibration/h200-demo-analytic ${FORCE:-}
for runtime in analytic graph eager; do
    echo "== h200-demo-$runtime"
    simspec tune --profile calibration/h200-demo-$runtime --json | tail -1
done
python scripts/gpu/tree-choice.py --reference calibration/h200-demo-graph \
    calibration/h200-demo-analytic calibration/h200-demo-eager
