#!/usr/bin/env bash
# docs/results/batches.md "Validation at batch 4": this machine's curves at batch 1 and 4 (calibrate,
# the shipped HumanEval traces), measured right before, then `validate --real --batch-size 4` on 8
# held-out prompts of each set in PROMPTS (default "humaneval sharegpt"), 3 passes each. Run it
# alone: it measures time. RECALIBRATE=1 adds --recalibrate (each validation refits the curves at
# batch 4 in situ on 8 train prompts of its set first). TEMPERATURE=1 samples: the profile is
# calibrated on the shipped T = 1 traces and every pass samples its queue with its own seeds.
# Writes OUT/profile and OUT/validate-PROMPTS/ (OUT defaults to research/runs/batch4).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
OUT=${OUT:-research/runs/batch4}
T=${TEMPERATURE:-0}
EXTRA=(--temperature "$T")
[[ "${RECALIBRATE:-0}" == 1 ]] && EXTRA+=(--recalibrate)
TRACES=calibration/traces-humaneval-eagle
[[ "$T" != 0 ]] && TRACES=calibration/traces-humaneval-eagle-T1
simspec calibrate --gpu cpu --traces-from "$TRACES" --temperature "$T" --batch-sizes 1,4 --check-prompts 0 \
    --out "$OUT/profile" --force --json | tail -1
for prompts in ${PROMPTS:-humaneval sharegpt}; do
    simspec validate --real --profile "$OUT/profile" --batch-size 4 --n-prompts 8 --repeats 3 --prompts $prompts "${EXTRA[@]}" \
        --out "$OUT/validate-$prompts" --force --json | tail -1
done
