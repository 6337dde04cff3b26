#!/usr/bin/env bash
# The shipped EAGLE-3 head (`--draft eagle`, real/drafters/eagle/): train it (resumable), measure its card, and its real speedup over
# plain greedy decoding on 40 + 40 held-out prompts in bf16 (and fp32 latency beside bf16).
# Takes ~1 h 50 min on the Xeon (bf16 in hardware; elsewhere bf16 is emulated and slow) (corpus 22 min, training ~55 min, benches ~30 min).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
[ -d real/drafters/eagle ] || simspec train-draft --kind eagle3 --dtype bf16 --epochs 4 --out real/drafters/eagle --json
simspec drafter-card --draft eagle --dtype bf16 --n-prompts 8 --max-new-tokens 64 --json | tee real/bench/eagle3-card-bf16.txt
for dtype in fp32 bf16; do
  simspec latency --draft eagle --dtype "$dtype" --sizes 1,2,4,8,16,32 --contexts 256 --widths 1,4,10 --json \
      | tee "real/bench/latency-eagle3-${dtype}.txt"
done
for prompts in humaneval sharegpt; do
  simspec bench-engine --draft eagle --dtype bf16 --prompts "$prompts" --n-prompts 40 --max-new-tokens 64 \
      --depths 5,7 --widths 4 --sizes 6,10,16 --json | tee "real/bench/speedup-eagle3-bf16-${prompts}40.txt"
done
