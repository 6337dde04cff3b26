#!/usr/bin/env bash
# docs/results/training.md#ltds-paper-schedule-fp32-and-bf16 (the floor table): LTD's PPO gradient step
# in bare torch, fp32 and bf16. Writes research/runs/bench/ppo-update-floor.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
python3 research/scripts/ppo_update_floor.py | tee research/runs/bench/ppo-update-floor.txt
