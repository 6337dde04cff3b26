#!/usr/bin/env bash
# docs/results.md "Validation at batch 4": this machine's curves at batch 1 and 4 (calibrate, the
# shipped HumanEval traces), measured right before, then `validate --real --batch-size 4` on 8
# held-out HumanEval and 8 held-out ShareGPT prompts, 3 passes each. Run it alone: it measures time.
# RECALIBRATE=1 adds --recalibrate (each validation refits the curves at batch 4 in situ on 8 train
# prompts of its set first). Writes OUT/profile and OUT/validate-{humaneval,sharegpt}/ (OUT
# defaults to real/batch4).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
OUT=${OUT:-real/batch4}
EXTRA=()
[[ "${RECALIBRATE:-0}" == 1 ]] && EXTRA=(--recalibrate)
simspec calibrate --gpu cpu --traces-from calibration/traces-humaneval-eagle --batch-sizes 1,4 --check-prompts 0 \
    --out "$OUT/profile" --force --json | tail -1
for prompts in humaneval sharegpt; do
    simspec validate --real --profile "$OUT/profile" --batch-size 4 --n-prompts 8 --repeats 3 --prompts $prompts "${EXTRA[@]}" \
        --out "$OUT/validate-$prompts" --force --json | tail -1
done
