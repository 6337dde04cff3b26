#!/usr/bin/env bash
# docs/results/training.md#ltds-paper-schedule-fp32-and-bf16: LTD's paper schedule against
# calibration/cpu-demo, timed. Usage: research/scripts/train-ltd-paper.sh [bf16|fp32]
# bf16 (the default, --precision auto on a CPU with native bf16): 14 min; fp32: 23 min.
# Writes research/runs/bench/ltd-paper-schedule-PRECISION.txt, -policy.json (and -training.csv for bf16).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
precision=${1:-bf16}
case "$precision" in
  bf16) flag=auto; out=/tmp/ltd-paper-mixed ;;
  fp32) flag=fp32; out=/tmp/ltd-paper-fp32 ;;
  *) echo "usage: $0 [bf16|fp32]" >&2; exit 2 ;;
esac
stem=research/runs/bench/ltd-paper-schedule-$precision
cmd=(simspec train --simulated --profile calibration/cpu-demo --algo ltd --preset paper --precision "$flag"
     --out "$out" --force --json)
echo "# ${cmd[*]}   ($(date -u +%F))" > "$stem.txt"
/usr/bin/time -v -o "$out.time" "${cmd[@]}" | tee -a "$stem.txt"
grep -E 'Elapsed|Maximum resident' "$out.time" >> "$stem.txt"
cp "$out/policy.json" "$stem-policy.json"
if [ "$precision" = bf16 ]; then cp "$out/training.csv" "$stem-training.csv"; fi
