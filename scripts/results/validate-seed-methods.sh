#!/usr/bin/env bash
# docs/findings.md (real-engine rows of seed 003's rules and the classifier stopping rules):
# validate --real on 8 held-out HumanEval prompts, 48 new tokens, two passes, the shipped profile
# refitted in the same process on 8 train prompts (--recalibrate). Methods: the grid best, the
# analytic window, the FSM, seed 003's token-cache FSM and Q-learning agent, SpecDec++ and Disco
# (classifiers trained on the profile's train traces). Run it alone: it measures time.
# Writes real/validate-seed-methods-humaneval8/ (ship: FORCE=--force replaces it).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
simspec validate --real --profile calibration/cpu-demo --recalibrate --prompts humaneval --n-prompts 8 \
    --max-new-tokens 48 --repeats 2 --baselines grid,analytic,fsm,cachefsm-token,qlearn-paper,specdecpp,disco \
    --out real/validate-seed-methods-humaneval8 --json ${FORCE:-}
