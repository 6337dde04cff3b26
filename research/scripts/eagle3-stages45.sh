#!/usr/bin/env bash
# The two research heads that continue the shipped EAGLE-3 head (real/drafters/eagle) for one pass over stage 3's
# corpus (rebuilt from its cached text), each with one change, then their fp32 cards; neither ships, neither is in
# the tree (hashes: docs/results/drafters.md#research-checkpoints-not-in-the-tree). Resumable; skips a head that exists.
#   stage 4, real/drafters/eagle-stage4/: draft vocabulary 8,192 -> 16,384 (a teacher pass of ~100 min, 1,168 steps
#            ~61 min on the EPYC-Z4; card 285 s);
#   stage 5, real/drafters/eagle-wide/: MLP 1,536 -> 3,072 units (1,168 steps at ~5 s on the EPYC-Z4; card 285 s).
# Writes research/runs/bench/eagle-stage4-card-fp32.txt and research/runs/bench/eagle-wide-card-fp32.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
corpus=(--tokens 2000000 --data self:0.7,selfcode:0.12,sharegpt:0.09,code:0.09 --epochs 1 --lr 2e-4)
[ -d real/drafters/eagle-stage4 ] || simspec train-draft --kind eagle3 --dtype bf16 --init real/drafters/eagle \
    --draft-vocab 16384 "${corpus[@]}" --out real/drafters/eagle-stage4 --json
[ -d real/drafters/eagle-wide ] || simspec train-draft --kind eagle3 --dtype bf16 --init real/drafters/eagle \
    --intermediate-size 3072 "${corpus[@]}" --out real/drafters/eagle-wide --json
for head in eagle-stage4 eagle-wide; do
  simspec drafter-card --draft "real/drafters/$head" --json | tee "research/runs/bench/$head-card-fp32.txt"
done
