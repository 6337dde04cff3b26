#!/usr/bin/env bash
# docs/findings.md#re-sps-choosing-its-top-k: Re-SpS with each node keeping the traces' width of
# children (the default, --top-k width) against Re-SpS choosing (TT, d, k) per interval (--top-k
# choose: k in 2, 4, 6, 10 within the recorded width-10 trees), 4 seeds each, preset fast, on the
# shipped T = 1 profile; then both sets scored beside the grid best in the simulator (held-out
# traces) and on the real engine (8 held-out HumanEval prompts at T = 1). Run alone. The policies go
# to runs/ (not tracked: the script retrains them); the two reports to research/runs/resps-top-k/.
#     bash research/scripts/resps-top-k.sh
source "$(dirname "$0")/two-variants.sh"
train_variants resps --top-k "width choose" resps-top-k
score_variants research/runs/resps-top-k
# Four width seeds deploy one behaviour, as do choose seeds 2-4 (the same held-out τ and speedup):
# the distinct policies again, three passes, for the real difference against its noise.
simspec validate --real --profile "$PROFILE" --temperature 1 --n-prompts 8 --repeats 3 --baselines grid \
    --policies runs/resps-top-k/resps-width-s1,runs/resps-top-k/resps-choose-s1,runs/resps-top-k/resps-choose-s2 \
    --out research/runs/resps-top-k/validate-real-3passes --force
keep_run research/runs/resps-top-k/validate-real-3passes
