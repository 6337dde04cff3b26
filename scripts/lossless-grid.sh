#!/usr/bin/env bash
# The lossless grid: 25 held-out HumanEval + 25 held-out ShareGPT prompts,
# D in {1,3,8,12} x W in {1,4,10} x V in {1,8,60,240}, run in chunks of 5 prompts so that a
# stopped run keeps what it finished (finished chunks are skipped on a rerun).
# Usage: [THREADS=N] [BATCH=B] [RUNTIME=R] [OFFSETS="0 5"] [CHUNK=5] scripts/lossless-grid.sh OUT_DIR [DRAFT] [MAX_NEW]
# (THREADS=1 lets the grid share a 2-core machine with other work: it checks outputs, not timings;
# BATCH and RUNTIME pass --batch-size and --runtime; OFFSETS chooses the chunks, default all five;
# CHUNK prompts per process, default 5: the compiled runtime compiles once per process, so fewer,
# larger chunks pay it fewer times, e.g. CHUNK=20 OFFSETS=5 for prompts 5-24.)
# Then: python scripts/summarise-grid.py OUT_DIR OUT_DIR.json
set -euo pipefail
out=${1:?output directory}
draft=${2:-target-layers:4}
max_new=${3:-24}
mkdir -p "$out"
for prompts in humaneval sharegpt; do
  for offset in ${OFFSETS:-0 5 10 15 20}; do
    file="$out/$prompts-$offset.json"
    [ -s "$file" ] && continue
    simspec bench-engine --prompts "$prompts" --split heldout --n-prompts "${CHUNK:-5}" --offset "$offset" \
      --draft "$draft" --max-new-tokens "$max_new" --depths 1,3,8,12 --widths 1,4,10 --sizes 1,8,60,240 \
      ${THREADS:+--threads $THREADS} ${BATCH:+--batch-size $BATCH} ${RUNTIME:+--runtime $RUNTIME} --json \
      | tail -n 1 > "$file.tmp"
    mv "$file.tmp" "$file"
  done
done
