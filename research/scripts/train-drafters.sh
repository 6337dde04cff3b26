#!/usr/bin/env bash
# docs/results/drafters.md#the-draft-lm: the teacher corpus (1,583 s, cached under
# ~/.cache/simspec/distill/) and the draft LM (442 s), then the drafters' model cards. Writes
# real/drafters/lm/ (it ships: FORCE=--force replaces it); the shipped EAGLE-3 head,
# real/drafters/eagle/, is made by eagle3-drafter.sh. The shipped traces, profiles and policies were recorded with the shipped
# drafters: new drafters need new ones (calibrate-cpu-demo.sh, train-policies.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
simspec train-draft --kind lm --tokens 180000 --epochs 3 --lr 2e-3 --out real/drafters/lm --json ${FORCE:-}
bash research/scripts/drafter-cards.sh
