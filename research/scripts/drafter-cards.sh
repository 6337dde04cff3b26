#!/usr/bin/env bash
# docs/results/drafters.md#the-draft-lm: measure the shipped draft LM (draft-step latency vs W, held-out
# agreement and acceptance per depth) and rewrite its model card, real/drafters/lm/README.md and
# measured.json. The EAGLE-3 head's card: eagle3-drafter.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
simspec drafter-card --draft lm
