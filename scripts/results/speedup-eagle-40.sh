#!/usr/bin/env bash
# docs/results.md#speedup-over-greedy-40--40-held-out-prompts: two trees vs plain greedy
# decoding on 40 held-out HumanEval and 40 held-out ShareGPT prompts, two passes (run it alone:
# it measures time). Writes real/bench/speedup-eagle-{humaneval,sharegpt}40.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
for prompts in humaneval sharegpt; do
  simspec bench-engine --draft eagle --prompts "$prompts" --n-prompts 40 --max-new-tokens 48 \
      --depths 5 --widths 4 --sizes 6,8 --repeats 2 --json | tee "real/bench/speedup-eagle-${prompts}40.txt"
done
