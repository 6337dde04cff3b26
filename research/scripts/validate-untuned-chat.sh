#!/usr/bin/env bash
# docs/results/validation.md#batch-1-on-a-chat-set-nothing-was-tuned-on: this machine's curves (calibrate, the
# shipped HumanEval traces), measured right before, then `validate --real --recalibrate` at batch 1
# on 8 held-out prompts of `sharegpt-later` (each ShareGPT conversation's second human turn: no
# profile, drafter, refit or table was made from it), the in-situ refit on 8 of its train prompts,
# 64 tokens, PASSES passes (default 3). Run it alone: it measures time.
# Writes OUT/profile and OUT/validate/ (OUT defaults to research/runs/untuned-chat).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
OUT=${OUT:-research/runs/untuned-chat}
simspec calibrate --gpu cpu --traces-from calibration/traces-humaneval-eagle --check-prompts 0 \
    --out "$OUT/profile" --force --json | tail -1
simspec validate --real --profile "$OUT/profile" --recalibrate --prompts sharegpt-later --n-prompts 8 \
    --max-new-tokens 64 --repeats "${PASSES:-3}" --baselines "${BASELINES:-eagle3,grid,ddd,svip,gammatune}" \
    --out "$OUT/validate" --force --json | tail -1
