#!/usr/bin/env bash
# docs/results.md#the-shipped-drafters and #latency-of-the-target-and-the-drafts: measure the
# shipped drafters (draft-step latency vs W, held-out agreement and acceptance per depth) and
# rewrite their model cards, real/drafters/{eagle,lm}/README.md and measured.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
simspec drafter-card --draft eagle --n-prompts 6 --max-new-tokens 48
simspec drafter-card --draft lm
