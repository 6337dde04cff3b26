#!/usr/bin/env bash
# docs/results/drafters.md#feature-regression-ablation: two EAGLE-head runs that differ only in the
# feature-regression weight (2 epochs, 1 thread each; they reuse the cached teacher corpus).
# Prints held-out top-1 / top-10 agreement; writes /tmp/abl-fw0 and /tmp/abl-fw1.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
for weight in 0 1; do
  simspec train-draft --kind eagle --tokens 180000 --epochs 2 --feature-weight "$weight" \
      --threads 1 --out "/tmp/abl-fw$weight" --force --json
done
