#!/usr/bin/env bash
# Issue 50: grows the committed teacher-text store (real/teacher-text/, docs/drafters.md#the-committed-teacher-text)
# toward the next head's corpus: the target's own text for 6 M corpus tokens, every self-distilled pool in this
# order (the order fixes which prompts each budget takes; keep it): the `self` pool whole (greedy), the same sampled
# at T = 1, ShareGPT's later turns and the stdlib stubs whole, 2 M tokens of installed packages' stubs; then the
# held-out text the run scores agreement on. ShareGPT's later turns and the stdlib stubs are generated first, each
# pool whole (its budget here exceeds it, so the 6 M corpus finds every prompt it takes of them stored): greedy
# text of prompts the `self` pool lacks is what the card's greedy agreement gains most from. Resumable: what the store holds is skipped, what a run finishes is
# saved every minute and on SIGINT/SIGTERM (`timeout -s INT 2h bash research/scripts/teacher-text.sh` stops it
# cleanly). Commit real/teacher-text/ after each session; `research/scripts/teacher-text.py` counts what it holds.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
simspec train-draft --text-only --text-store real/teacher-text --tokens 700000 --data selfturns:0.5,selfcode:0.5 \
    --generation-batch "${BATCH:-128}" --json
simspec train-draft --text-only --text-store real/teacher-text --tokens 6000000 \
    --data self:0.24,selft1:0.24,selfturns:0.05,selfcode:0.05,selfpkg:0.34,sharegpt:0.04,code:0.04 \
    --generation-batch "${BATCH:-128}" --json
