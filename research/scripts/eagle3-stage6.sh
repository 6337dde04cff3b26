#!/usr/bin/env bash
# Issue 50: two research heads that continue the shipped EAGLE-3 head (real/drafters/eagle) for one pass over the same
# 1 M tokens of the committed teacher text, most of it text the head has not seen (ShareGPT's later turns, the self
# prompts sampled at T = 1, the grown stdlib-stub pool) beside its own `self` pool:
#   real/drafters/eagle-stage6/       with stages 4 and 5's changes at once: draft vocabulary 8,192 -> 16,384 and
#                                     MLP 1,536 -> 3,072 units, then its fp32 card;
#   real/drafters/eagle-stage6-text/  the control: the same text, the head's own shape;
#   real/drafters/eagle-stage6-hard/  the control with hard labels (the target's greedy token, not its distribution).
# `--validation` holds 1/16 of the train prompts apart (the shipped head trained on them: it flatters every head that
# starts from it). The control's `init_agreement` scores the shipped head itself on the same held-out and validation
# corpora before training: the yardstick for both. Missing text goes into real/teacher-text/ (commit it).
# Resumable; skips a head that exists. On the EPYC-Z4 (2026-12-01): missing text 8 min, teacher pass 22 min (shared
# by all), training 570 steps: 61 min (stage 6), ~33 min (control), 35 min (hard labels, 2026-12-02); card 5 min.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
corpus=(--kind eagle3 --dtype bf16 --init real/drafters/eagle --tokens 1000000
        --data self:0.3,selft1:0.3,selfturns:0.25,selfcode:0.15 --epochs 1 --lr 2e-4 --validation
        --text-store real/teacher-text)
[ -d real/drafters/eagle-stage6 ] || simspec train-draft "${corpus[@]}" --draft-vocab 16384 --intermediate-size 3072 \
    --out real/drafters/eagle-stage6 --json
[ -f research/runs/bench/eagle-stage6-card-fp32.txt ] ||
    simspec drafter-card --draft real/drafters/eagle-stage6 --json | tee research/runs/bench/eagle-stage6-card-fp32.txt
[ -d real/drafters/eagle-stage6-text ] || simspec train-draft "${corpus[@]}" --out real/drafters/eagle-stage6-text --json
[ -d real/drafters/eagle-stage6-hard ] || simspec train-draft "${corpus[@]}" --labels hard --out real/drafters/eagle-stage6-hard \
    --json
