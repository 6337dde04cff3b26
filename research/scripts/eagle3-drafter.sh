#!/usr/bin/env bash
# The EAGLE-3 heads for the demo target, trained here (resumable), then measured: card, latency in fp32 and bf16, and
# real speedup over plain greedy decoding on 40 + 40 held-out prompts in bf16
# (~31 min on the EPYC-Z4 after training; each divergence report kept before the JSON line).
#   stage 1, real/drafters/eagle-stage1/: 480 k teacher tokens, hard labels, 4 epochs
#            (corpus 22 min, training 52 min on the Xeon; bf16 in hardware, elsewhere emulated and slow);
#   stage 2, real/drafters/eagle-next/: continues stage 1 (--init) on a 1 M-token corpus cut at end tokens, with
#            EAGLE's soft labels, 2 epochs (corpus ~40 min, training ~65 min);
#   stage 3, real/drafters/eagle/ (--draft eagle, trained as real/drafters/eagle-stage3/): continues stage 2 on a 2 M-token corpus (7,186 chat prompts, nearly the whole
#            train pool, and 1,100 stdlib stubs self-distilled), 1 epoch at a lower peak lr (generation ~100 min, teacher
#            pass 20 min on the Xeon / 36 min on the EPYC-Z4, training 66 / 65 min; while it runs, the text is kept in
#            real/drafters/eagle-stage3.partial/ so that a stopped run resumes on any machine).
# Stages 1 and 2 are not in the tree (their hashes: docs/results/drafters.md#research-checkpoints-not-in-the-tree): each is
# trained only when a later stage is missing or DRAFTER names it.
# DRAFTER=real/drafters/eagle-stage1 bash research/scripts/eagle3-drafter.sh retrains and measures stage 1 instead of the
# shipped head (likewise DRAFTER=real/drafters/eagle-next).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
DRAFTER="${DRAFTER:-eagle}"
named() { [ "$DRAFTER" = "$1" ] || [ "$DRAFTER" = "real/drafters/$1" ]; }
need_next=0; { [ -d real/drafters/eagle ] && ! named eagle-next; } || need_next=1
[ -d real/drafters/eagle-next ] && need_next=0
need_stage1=0; { [ $need_next = 1 ] || named eagle-stage1; } && need_stage1=1
[ -d real/drafters/eagle-stage1 ] && need_stage1=0
[ $need_stage1 = 0 ] || simspec train-draft --kind eagle3 --dtype bf16 --epochs 4 --labels hard \
    --no-cut-at-eos --out real/drafters/eagle-stage1 --json
[ $need_next = 0 ] || simspec train-draft --kind eagle3 --dtype bf16 --init real/drafters/eagle-stage1 \
    --tokens 1000000 --data self:0.7,selfcode:0.12,sharegpt:0.09,code:0.09 --epochs 2 --lr 5e-4 \
    --out real/drafters/eagle-next --json
[ -d real/drafters/eagle ] || simspec train-draft --kind eagle3 --dtype bf16 --init real/drafters/eagle-next \
    --tokens 2000000 --data self:0.7,selfcode:0.12,sharegpt:0.09,code:0.09 --epochs 1 --lr 2e-4 \
    --out real/drafters/eagle --json
tag=$([ "$DRAFTER" = eagle ] && echo eagle3 || basename "$DRAFTER")
# the bf16 card goes to a folder of its own (--out), so the drafter's fp32 card stays
card=$(mktemp -d); trap 'rm -rf "$card"' EXIT
simspec drafter-card --draft "$DRAFTER" --dtype bf16 --n-prompts 8 --max-new-tokens 64 --out "$card" --json \
    | tee "research/runs/bench/${tag}-card-bf16.txt"
for dtype in fp32 bf16; do
  simspec latency --draft "$DRAFTER" --dtype "$dtype" --sizes 1,2,4,8,16,32 --contexts 256 --widths 1,4,10 --json \
      | tee "research/runs/bench/latency-${tag}-${dtype}.txt"
done
for prompts in humaneval sharegpt; do
  simspec bench-engine --draft "$DRAFTER" --dtype bf16 --prompts "$prompts" --n-prompts 40 --max-new-tokens 64 \
      --depths 5,7 --widths 4 --sizes 6,10,16 --json 2>&1 | tee "research/runs/bench/speedup-${tag}-bf16-${prompts}40.txt"
done
