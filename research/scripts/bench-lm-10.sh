#!/usr/bin/env bash
# docs/results/drafters.md#the-draft-lm: chains and trees of
# the draft LM vs plain greedy decoding on 10 held-out prompts per set, one pass.
# Writes research/runs/bench/demo-lm-{humaneval,sharegpt}10.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
for prompts in humaneval sharegpt; do
  simspec bench-engine --draft lm --prompts "$prompts" --n-prompts 10 --max-new-tokens 48 \
      --depths 3,5 --widths 1,4 --sizes 6 --json | tee "research/runs/bench/demo-lm-${prompts}10.txt"
done
