#!/usr/bin/env bash
# docs/results/sampling.md#speculative-sampling-lossless-at-t--0: bench-engine at T = 1 and T = 0.7 with
# both shipped drafters (EAGLE-3 head: tree walk; draft LM: tree walk, and the q-aware rule in
# its chains), 4 held-out HumanEval prompts x 2 passes (each its own seed), 48 new tokens. Every
# output token's PIT under the target is KS-tested against Uniform(0, 1). ~10 min on the EPYC.
# Writes research/runs/bench/sampling-{eagle,lm}-T{1,0.7}.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
mkdir -p research/runs/bench
for draft in eagle lm; do
  for t in 1 0.7; do
    simspec bench-engine --draft "$draft" --prompts humaneval --n-prompts 4 --max-new-tokens 48 \
        --depths 1,4,6 --widths 1,4 --sizes 8,16 --repeats 2 --temperature "$t" --seed 0 --json \
      | tail -1 > "research/runs/bench/sampling-$draft-T$t.json"
  done
done
