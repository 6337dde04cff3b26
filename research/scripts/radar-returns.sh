#!/usr/bin/env bash
# docs/findings.md#radar-from-acceptance-length-draws: RADAR trained on the expected accepted length
# (the default) against RADAR trained on one draw per episode from the tree's acceptance-length law
# (--returns sampled, the paper's offline data), 4 seeds each, preset fast, on the shipped T = 1
# profile; then both sets scored beside the grid best in the simulator (held-out traces) and on the
# real engine (8 held-out HumanEval prompts at T = 1). Run alone. The policies go to runs/ (not
# tracked: the script retrains them); the two reports to research/runs/radar-returns/.
#     bash research/scripts/radar-returns.sh            # about 25 min on the 2-core EPYC
source "$(dirname "$0")/two-variants.sh"
train_variants radar --returns "expected sampled" radar-returns
score_variants research/runs/radar-returns
