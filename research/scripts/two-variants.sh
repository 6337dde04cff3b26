# Sourced by the scripts that compare two values of one `train` flag over seeds 1-4 on the shipped
# T = 1 profile (radar-returns.sh, resps-top-k.sh): train_variants trains what is missing and fills
# $list; score_variants scores the list beside the grid best, simulated and real; keep_run keeps a
# real run as the notebook keeps one (research/README.md).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export PATH="$PWD/.venv/bin:$PATH"
PROFILE=calibration/cpu-demo-T1

# train_variants ALGO FLAG "VALUE VALUE" NAME: policies runs/NAME/ALGO-VALUE-sSEED (not tracked)
train_variants() {
  local algo=$1 flag=$2 values=$3 name=$4 policies=() seed value folder
  mkdir -p "runs/$name"
  for seed in 1 2 3 4; do
    for value in $values; do
      folder="runs/$name/$algo-$value-s$seed"
      [ -f "$folder/policy.json" ] || simspec train --simulated --profile "$PROFILE" --algo "$algo" --preset fast \
          --seed "$seed" "$flag" "$value" --threads 1 --out "$folder" --json --force
      policies+=("$folder")
    done
  done
  list=$(IFS=,; echo "${policies[*]}")
}

# keep_run FOLDER: the report gzipped; figures and cycles left out (`simspec plot validation` redraws them)
keep_run() {
  rm -f "$1"/*.png "$1/cycles.npz"
  gzip -nf "$1/report.json"
}

# score_variants OUT: held-out traces in the simulator, then 8 held-out prompts on the real engine
score_variants() {
  mkdir -p "$1"
  simspec validate --simulated --profile "$PROFILE" --temperature 1 --baselines grid --policies "$list" --json \
      > "$1/validate-simulated.txt"
  simspec validate --real --profile "$PROFILE" --temperature 1 --n-prompts 8 --baselines grid --policies "$list" \
      --out "$1/validate-real" --force
  keep_run "$1/validate-real"
}
