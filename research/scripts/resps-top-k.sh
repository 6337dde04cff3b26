#!/usr/bin/env bash
# docs/findings.md#re-sps-choosing-its-top-k: Re-SpS with each node keeping the traces' width of
# children (the default, --top-k width) against Re-SpS choosing (TT, d, k) per interval (--top-k
# choose: k in 2, 4, 6, 10 within the recorded width-10 trees), 4 seeds each, preset fast, on the
# shipped T = 1 profile; then both sets scored beside the grid best in the simulator (held-out
# traces) and on the real engine (8 held-out HumanEval prompts at T = 1). Run alone. The policies go
# to runs/ (not tracked: the script retrains them); the two reports to research/runs/resps-top-k/.
#     bash research/scripts/resps-top-k.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
PROFILE=calibration/cpu-demo-T1
OUT=research/runs/resps-top-k
mkdir -p "$OUT" runs/resps-top-k
policies=()
for seed in 1 2 3 4; do
  for top_k in width choose; do
    folder="runs/resps-top-k/resps-$top_k-s$seed"
    [ -f "$folder/policy.json" ] || simspec train --simulated --profile "$PROFILE" --algo resps --preset fast \
        --seed "$seed" --top-k "$top_k" --threads 1 --out "$folder" --json --force
    policies+=("$folder")
  done
done
list=$(IFS=,; echo "${policies[*]}")
simspec validate --simulated --profile "$PROFILE" --temperature 1 --baselines grid --policies "$list" --json \
    > "$OUT/validate-simulated.txt"
simspec validate --real --profile "$PROFILE" --temperature 1 --n-prompts 8 --baselines grid --policies "$list" \
    --out "$OUT/validate-real" --force
# kept as the notebook keeps a run (research/README.md): the report, gzipped; figures and cycles left out
rm -f "$OUT"/validate-real/*.png "$OUT/validate-real/cycles.npz"
gzip -nf "$OUT/validate-real/report.json"
# Four width seeds deploy one behaviour, as do choose seeds 2-4 (the same held-out τ and speedup):
# the distinct policies again, three passes, for the real difference against its noise.
simspec validate --real --profile "$PROFILE" --temperature 1 --n-prompts 8 --repeats 3 --baselines grid \
    --policies runs/resps-top-k/resps-width-s1,runs/resps-top-k/resps-choose-s1,runs/resps-top-k/resps-choose-s2 \
    --out "$OUT/validate-real-3passes" --force
rm -f "$OUT"/validate-real-3passes/*.png "$OUT/validate-real-3passes/cycles.npz"
gzip -nf "$OUT/validate-real-3passes/report.json"
