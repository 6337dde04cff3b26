#!/usr/bin/env bash
# The GPU run of the compiled runtime, ready for a lent CUDA machine (not yet run: no GPU has been
# lent since it was written). On the demo target with the shipped EAGLE-3 head and the shipped
# HumanEval traces, fp32:
#   1. calibrate under --runtime compiled (CUDA graphs; the quick grid), and under eager with
#      curves at batch 1 and 8 (calibrate measures the compiled runtime at batch 1 only);
#   2. validate --real on N held-out HumanEval prompts: compiled at batch 1, eager at batch 1 and 8;
#   3. bench-engine at batch 8, compiled and eager (plain decoding and two static trees);
#   4. leave every profile, report.json and --json line under OUT for docs/results.md.
# Needs this checkout installed (bash .ci/install; a machine without network gets .venv carried).
#
#   bash research/scripts/gpu-run-demo.sh [OUT]        # default research/runs/gpu/run-demo; N=4 TOKENS=48
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
OUT=${1:-research/runs/gpu/run-demo}
N=${N:-4}
TOKENS=${TOKENS:-48}
TRACES=calibration/traces-humaneval-eagle
python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA device: this script runs on a GPU')"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/gpu.csv" || true
SECONDS=0
simspec calibrate --gpu auto --runtime compiled --quick --traces-from $TRACES --check-prompts 0 \
    --out "$OUT/profile-compiled" --force --json > "$OUT/calibrate-compiled.json"
echo "calibrate compiled: ${SECONDS}s"
simspec calibrate --gpu auto --quick --batch-sizes 1,8 --traces-from $TRACES --check-prompts 0 \
    --out "$OUT/profile-eager" --force --json > "$OUT/calibrate-eager.json"
echo "calibrate eager (B = 1, 8): ${SECONDS}s"
simspec validate --real --profile "$OUT/profile-compiled" --runtime compiled --baselines eagle3,grid \
    --n-prompts "$N" --max-new-tokens "$TOKENS" --out "$OUT/validate-compiled-b1" --force --json \
    > "$OUT/validate-compiled-b1.json"
echo "validate compiled, batch 1: ${SECONDS}s"
simspec validate --real --profile "$OUT/profile-eager" --baselines eagle3,grid \
    --n-prompts "$N" --max-new-tokens "$TOKENS" --out "$OUT/validate-eager-b1" --force --json \
    > "$OUT/validate-eager-b1.json"
echo "validate eager, batch 1: ${SECONDS}s"
simspec validate --real --profile "$OUT/profile-eager" --batch-size 8 --baselines eagle3,grid \
    --n-prompts 8 --max-new-tokens "$TOKENS" --out "$OUT/validate-eager-b8" --force --json \
    > "$OUT/validate-eager-b8.json"
echo "validate eager, batch 8: ${SECONDS}s"
for runtime in compiled eager; do
    simspec bench-engine --batch-size 8 --runtime $runtime --n-prompts 8 --max-new-tokens "$TOKENS" \
        --depths 4,6 --widths 10 --sizes 6,12 --repeats 2 --json | tail -n 1 > "$OUT/bench-b8-$runtime.json"
    echo "bench-engine batch 8 $runtime: ${SECONDS}s"
done
echo "everything is in $OUT"
