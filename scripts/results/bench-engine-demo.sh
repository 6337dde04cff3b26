#!/usr/bin/env bash
# docs/results.md#engine-benchmark-3-prompts: bench-engine at its defaults with the EAGLE head
# (3 held-out HumanEval prompts, 48 new tokens). Writes real/bench/demo-eagle-humaneval3.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
simspec bench-engine --draft eagle | tee real/bench/demo-eagle-humaneval3.txt
