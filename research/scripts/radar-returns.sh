#!/usr/bin/env bash
# docs/findings.md#radar-from-acceptance-length-draws: RADAR trained on the expected accepted length
# (the default) against RADAR trained on one draw per episode from the tree's acceptance-length law
# (--returns sampled, the paper's offline data), 4 seeds each, preset fast, on the shipped T = 1
# profile; then both sets scored beside the grid best in the simulator (held-out traces) and on the
# real engine (8 held-out HumanEval prompts at T = 1). Run alone. The policies go to runs/ (not
# tracked: the script retrains them); the two reports to research/runs/radar-returns/.
#     bash research/scripts/radar-returns.sh            # about 25 min on the 2-core EPYC
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
PROFILE=calibration/cpu-demo-T1
OUT=research/runs/radar-returns
mkdir -p "$OUT" runs/radar-returns
policies=()
for seed in 1 2 3 4; do
  for returns in expected sampled; do
    folder="runs/radar-returns/radar-$returns-s$seed"
    [ -f "$folder/policy.json" ] || simspec train --simulated --profile "$PROFILE" --algo radar --preset fast \
        --seed "$seed" --returns "$returns" --threads 1 --out "$folder" --json --force
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
