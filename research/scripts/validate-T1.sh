#!/usr/bin/env bash
# docs/results.md#sampling-at-t--1-on-the-real-engine: validate --real at T = 1 on 8 held-out
# HumanEval and 8 held-out ShareGPT prompts, 48 new tokens, 4 seeds per prompt (--repeats 4), the
# profile calibration/cpu-demo-T1 refitted in the same process on 8 train prompts of the same set
# (--recalibrate, sampled like the scored runs). Methods: EAGLE-3's tree, the grid best, DDD,
# FSM, LTD trained at T = 0 and at T = 1, RADAR trained at T = 1. 38-46 min per set on the EPYC-Z4:
# run it alone, it measures time. Writes research/runs/validate-T1-{humaneval,sharegpt}8/ (ship:
# FORCE=--force replaces them; TAG=x writes research/runs/validate-T1-x-{humaneval,sharegpt}8/, a replicate;
# SETS=sharegpt runs one set).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
for prompts in ${SETS:-humaneval sharegpt}; do
  simspec validate --real --profile calibration/cpu-demo-T1 --temperature 1 --recalibrate --prompts "$prompts" \
      --n-prompts 8 --max-new-tokens 48 --repeats 4 --baselines eagle3,grid,ddd,fsm \
      --policies policies/ltd-cpu-demo,policies/ltd-cpu-demo-T1,policies/radar-cpu-demo-T1 \
      --out "research/runs/validate-T1-${TAG:+$TAG-}${prompts}8" --json ${FORCE:-}
done
