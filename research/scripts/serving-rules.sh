#!/usr/bin/env bash
# docs/findings.md "The serving engines' own rules": this machine's curves at batch 1 and 4
# (calibrate, the shipped HumanEval traces), measured right before, then `validate --real` at batch
# 1 and at batch 4 on 8 held-out HumanEval prompts, PASSES passes (default 3): the best static
# tree, SGLang's adaptive steps, vLLM's per-batch K and the shipped LTD policy, interleaved with
# plain greedy decoding; at batch 4 the curves are first refitted in situ on 8 train prompts
# (--recalibrate: calibrate's tight loop under-prices a batched cycle's bookkeeping). Run it alone:
# it measures time. Writes OUT/profile and OUT/validate-b{1,4}/ (OUT defaults to research/runs/findings/serving).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
OUT=${OUT:-research/runs/findings/serving}
simspec calibrate --gpu cpu --traces-from calibration/traces-humaneval-eagle --batch-sizes 1,4 --check-prompts 0 \
    --out "$OUT/profile" --force --json | tail -1
for batch in 1 4; do
    refit=(); [[ $batch == 4 ]] && refit=(--recalibrate)
    simspec validate --real --profile "$OUT/profile" --batch-size $batch "${refit[@]}" --n-prompts 8 --repeats "${PASSES:-3}" \
        --prompts humaneval --baselines grid,sglang-adaptive,vllm-schedule --policies policies/ltd-cpu-demo \
        --out "$OUT/validate-b$batch" --force --json | tail -1
done
