#!/usr/bin/env bash
# Issue 50: the shipped EAGLE-3 head's card on 32 held-out prompts per source instead of 8 (fp32), beside the drafter's
# own card (which stays as it is): the bar (card top-1 >= 0.62) read with a standard error about half as large.
# Agreement and tau count tokens, not seconds, so they do not depend on a quiet machine; the card's draft-step timings
# do. On the EPYC-Z4 (2026-12-02) it took 51 min beside other jobs (about 20 alone, from the 8-prompt card's 275 s).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
out=research/runs/bench/eagle-card-fp32-n32
[ -f "$out/measured.json" ] || { simspec drafter-card --draft eagle --n-prompts 32 --out "$out" --json | tee /tmp/eagle-card-n32.txt
                                 cp /tmp/eagle-card-n32.txt "$out/console.txt"; }
