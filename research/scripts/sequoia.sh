#!/usr/bin/env bash
# docs/findings.md "Sequoia's tree vs the best (D, W, V) tree" (and the ShareGPT part of "The serving
# engines' own rules"). The simulator on the shipped CPU and H200 profiles; then the real engine, batch
# 1, T = 0: this machine's curves measured right before on the shipped HumanEval traces, and again on the
# mixed HumanEval + ShareGPT traces; `validate --real` on 8 held-out HumanEval prompts (the best static
# tree, Sequoia's tree, its per-depth variant, C2T, SGLang's and vLLM's rules; the curves refitted in
# situ first) and on 8 held-out ShareGPT first turns (the same but C2T), PASSES passes (default 3),
# interleaved with plain greedy decoding. PARTS="sim humaneval sharegpt" chooses the parts. Run it
# alone: it measures time. Writes OUT/sim-*.json, OUT/profile{,-mix}, OUT/validate-{humaneval,sharegpt}
# (OUT defaults to research/runs/findings/sequoia).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
OUT=${OUT:-research/runs/findings/sequoia}
mkdir -p "$OUT"
PARTS=${PARTS:-sim humaneval sharegpt}
if [[ $PARTS == *sim* ]]; then
  for profile in cpu-demo cpu-mix-eagle h200-demo-graph; do
    simspec validate --simulated --profile "calibration/$profile" \
        --baselines grid,sequoia,sequoia-depth,c2t,sglang-adaptive,vllm-schedule --json | tail -1 > "$OUT/sim-$profile.json"
  done
fi
if [[ $PARTS == *humaneval* ]]; then
simspec calibrate --gpu cpu --traces-from calibration/traces-humaneval-eagle --check-prompts 0 \
    --out "$OUT/profile" --force --json | tail -1
simspec validate --real --profile "$OUT/profile" --recalibrate --n-prompts 8 --repeats "${PASSES:-3}" \
    --prompts humaneval --baselines grid,sequoia,sequoia-depth,c2t,sglang-adaptive,vllm-schedule \
    --out "$OUT/validate-humaneval" --force --json | tail -1
fi
if [[ $PARTS == *sharegpt* ]]; then
simspec calibrate --gpu cpu --traces-from calibration/traces-mix-eagle --check-prompts 0 \
    --out "$OUT/profile-mix" --force --json | tail -1
simspec validate --real --profile "$OUT/profile-mix" --n-prompts 8 --repeats "${PASSES:-3}" --prompts sharegpt \
    --baselines grid,sequoia,sequoia-depth,sglang-adaptive,vllm-schedule --out "$OUT/validate-sharegpt" --force \
    --json | tail -1
fi
