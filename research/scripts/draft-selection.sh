#!/usr/bin/env bash
# docs/findings.md, seed 003 Tab. 2 (per-prompt draft-model selection): three drafters of the
# demo target (the EAGLE-3 head, the draft LM, and the target's first 6 layers with its norm and
# head) recorded on the same 64 prompts (HumanEval and ShareGPT taken in turn, 64 new tokens,
# fp32), a measured profile for each (curves timed on this machine one after another), then the
# simulator's comparison of seed 003's selection with the best fixed drafter and the per-prompt
# hindsight choice. Resumable: a step whose folder exists is skipped (FORCE=--force re-does all).
# Run it alone: the calibrations measure time.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
PROMPTS=humaneval+sharegpt N=64 TOKENS=64
for pair in eagle:eagle lm:lm tl6:target-layers:6; do
    name=${pair%%:*} draft=${pair#*:}
    [[ -e calibration/traces-mix-$name/traces.json && -z "${FORCE:-}" ]] ||
        simspec calibrate --traces-only --draft "$draft" --prompts $PROMPTS --n-prompts $N --max-new-tokens $TOKENS \
            --out calibration/traces-mix-$name ${FORCE:-}
done
for pair in eagle:eagle lm:lm tl6:target-layers:6; do
    name=${pair%%:*} draft=${pair#*:}
    [[ -e calibration/cpu-mix-$name/profile.json && -z "${FORCE:-}" ]] ||
        simspec calibrate --gpu cpu --draft "$draft" --traces-from calibration/traces-mix-$name \
            --out calibration/cpu-mix-$name ${FORCE:-}
done
simspec validate --simulated --profile calibration/cpu-mix-eagle \
    --drafters calibration/cpu-mix-lm,calibration/cpu-mix-tl6 --baselines grid,select --json
