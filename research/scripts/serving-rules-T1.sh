#!/usr/bin/env bash
# docs/findings.md "The serving engines' own rules" at T = 1 on the real engine: this machine's curves
# measured right before on the shipped T = 1 HumanEval traces, then `validate --real --temperature 1
# --recalibrate` (refitted in the same process on 8 train prompts, sampled like the scored runs) on 8
# held-out HumanEval prompts x PASSES seeds (default 3): the best static tree, SGLang's adaptive steps,
# vLLM's per-batch K and the LTD policy trained at T = 1, interleaved with plain sampling. Run it alone:
# it measures time. Writes OUT/profile-T1 and OUT/validate-T1 (OUT defaults to research/runs/findings/serving).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
OUT=${OUT:-research/runs/findings/serving}
simspec calibrate --gpu cpu --temperature 1 --traces-from calibration/traces-humaneval-eagle-T1 --check-prompts 0 \
    --out "$OUT/profile-T1" --force --json | tail -1
simspec validate --real --profile "$OUT/profile-T1" --temperature 1 --recalibrate --n-prompts 8 \
    --repeats "${PASSES:-3}" --prompts humaneval --baselines grid,sglang-adaptive,vllm-schedule \
    --policies policies/ltd-cpu-demo-T1 --out "$OUT/validate-T1" --force --json | tail -1
