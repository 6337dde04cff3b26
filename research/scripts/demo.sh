#!/usr/bin/env bash
# docs/results/validation.md#the-demo: `simspec demo` under /usr/bin/time (5.7 min on the EPYC, 7.3
# on the Xeon). Writes demo/ (FORCE=--force replaces it) and research/runs/bench/demo.txt (the demo's output;
# wall time and peak memory go to stderr).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
/usr/bin/time -f "wall %E, peak %M KiB" simspec demo ${FORCE:-} | tee research/runs/bench/demo.txt
