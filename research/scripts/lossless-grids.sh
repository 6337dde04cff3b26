#!/usr/bin/env bash
# docs/results/engine.md#lossless-grid: 31 trees x 50 held-out prompts (25 HumanEval + 25 ShareGPT),
# 16 new tokens, for the shipped EAGLE-3 head and the draft LM; every output must equal plain greedy
# decoding. 1 torch thread (THREADS=N to change): it checks outputs, not timings; resumable
# (finished chunks are skipped; the head's chunks take ~5 min each with 2 threads on the EPYC-Z4
# alone, ~18 min while sharing the CPU). Writes
# research/runs/bench/lossless-grid-{eagle,lm}/ and research/runs/bench/lossless-grid-{eagle,lm}.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
for draft in eagle lm; do
  THREADS=${THREADS:-1} bash scripts/lossless-grid.sh "research/runs/bench/lossless-grid-$draft" "$draft" 16
  python3 scripts/summarise-grid.py "research/runs/bench/lossless-grid-$draft" "research/runs/bench/lossless-grid-$draft.json"
done
