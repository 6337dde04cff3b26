#!/usr/bin/env bash
# docs/findings.md "How much of the oracle's gain is observable", real part: the Bayes rule against the
# best static tree on the real engine, batch 1, T = 0. This machine's curves measured right before on
# the shipped HumanEval traces, then `validate --real --recalibrate` on N (default 16) held-out HumanEval
# prompts; the same on the mixed HumanEval + ShareGPT traces and N held-out ShareGPT first turns. PASSES
# passes (default 2), interleaved with plain greedy decoding. PARTS="humaneval sharegpt" chooses the
# parts. Run it alone: it measures time. Writes OUT/profile{,-mix}, OUT/validate-{humaneval,sharegpt}
# (OUT defaults to real/findings/bayes).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
OUT=${OUT:-real/findings/bayes}
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
