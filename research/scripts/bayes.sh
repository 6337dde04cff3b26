#!/usr/bin/env bash
# docs/findings.md "How much of the oracle's gain is observable", real part: the Bayes rule against the
# best static tree on the real engine, batch 1, T = 0. This machine's curves measured right before on
# the shipped HumanEval traces, then `validate --real --recalibrate` on N (default 16) held-out HumanEval
# prompts; the same on the mixed HumanEval + ShareGPT traces and N held-out ShareGPT first turns. PASSES
# passes (default 2), interleaved with plain greedy decoding. Two more parts, not run by default:
# `batch4`, the curves at batch 1 and 4 measured, then `validate --real --batch-size 4 --recalibrate`
# on N4 (default 8) held-out HumanEval prompts (the static tree tuned at B = 4, the Bayes rule, SGLang's
# rule; as serving-rules.sh runs it); `T1`, the T = 1 HumanEval traces' curves measured, then
# `validate --real --temperature 1 --recalibrate` on N4 prompts x PASSES seeds. PARTS="humaneval sharegpt
# batch4 T1" chooses the parts. Run it alone: it measures time. Writes OUT/profile{,-mix,-b4,-T1},
# OUT/validate-{humaneval,sharegpt,b4,T1} (OUT defaults to research/runs/findings/bayes).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
OUT=${OUT:-research/runs/findings/bayes}
N=${N:-16}
mkdir -p "$OUT"
PARTS=${PARTS:-humaneval sharegpt}
if [[ $PARTS == *humaneval* ]]; then
simspec calibrate --gpu cpu --traces-from calibration/traces-humaneval-eagle --check-prompts 0 \
    --out "$OUT/profile" --force --json | tail -1
simspec validate --real --profile "$OUT/profile" --recalibrate --n-prompts "$N" --repeats "${PASSES:-2}" \
    --prompts humaneval --baselines grid,bayes --out "$OUT/validate-humaneval" --force --json | tail -1
fi
if [[ $PARTS == *sharegpt* ]]; then
simspec calibrate --gpu cpu --traces-from calibration/traces-mix-eagle --check-prompts 0 \
    --out "$OUT/profile-mix" --force --json | tail -1
simspec validate --real --profile "$OUT/profile-mix" --recalibrate --n-prompts "$N" --repeats "${PASSES:-2}" \
    --prompts sharegpt --baselines grid,bayes --out "$OUT/validate-sharegpt" --force --json | tail -1
fi
if [[ $PARTS == *batch4* ]]; then
simspec calibrate --gpu cpu --traces-from calibration/traces-humaneval-eagle --batch-sizes 1,4 --check-prompts 0 \
    --out "$OUT/profile-b4" --force --json | tail -1
simspec validate --real --profile "$OUT/profile-b4" --batch-size 4 --recalibrate --n-prompts "${N4:-8}" \
    --repeats "${PASSES:-2}" --prompts humaneval --baselines grid,bayes,sglang-adaptive \
    --out "$OUT/validate-b4" --force --json | tail -1
fi
if [[ $PARTS == *T1* ]]; then
simspec calibrate --gpu cpu --temperature 1 --traces-from calibration/traces-humaneval-eagle-T1 --check-prompts 0 \
    --out "$OUT/profile-T1" --force --json | tail -1
simspec validate --real --profile "$OUT/profile-T1" --temperature 1 --recalibrate --n-prompts "${N4:-8}" \
    --repeats "${PASSES:-2}" --prompts humaneval --baselines grid,bayes --out "$OUT/validate-T1" --force --json | tail -1
fi
