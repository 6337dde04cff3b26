#!/usr/bin/env bash
# docs/results.md#the-shipped-drafters: the teacher corpus (1,583 s, cached under
# ~/.cache/simspec/distill/), the EAGLE-style head (1,080 s) and the draft LM (442 s), then
# their model cards. Writes real/drafters/eagle/ and real/drafters/lm/ (they ship: FORCE=--force
# replaces them). The shipped traces, profiles and policies were recorded with the shipped
# drafters: new drafters need new ones (calibrate-cpu-demo.sh, train-policies.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
simspec train-draft --kind eagle --tokens 180000 --epochs 6 --out real/drafters/eagle --json ${FORCE:-}
simspec train-draft --kind lm --tokens 180000 --epochs 3 --lr 2e-3 --out real/drafters/lm --json ${FORCE:-}
bash scripts/results/drafter-cards.sh
