#!/usr/bin/env bash
# Makes a newly trained EAGLE-3 head the shipped one (`--draft eagle`) and re-records everything
# that describes the shipped head: the HumanEval traces (greedy and T = 1), the profiles that name
# them (measured, in situ, one-thread, batched, analytic), the mixed-set traces and profile of the
# draft-selection study, the shipped policies, the simulator's tables of them, the lossless grid
# and the drafter card. Outputs are recorded under their shipped names (docs/results.md cites them).
#
#   NEW=real/drafters/NEW-HEAD bash research/scripts/ship-head.sh     (the shipped head, stage 3, becomes $OLD)
#
# Step 0 renames (git mv) real/drafters/eagle to $OLD (the head the earlier runs under research/runs/ were
# measured with; their reports keep its fingerprint) and $NEW to real/drafters/eagle. No verb loads
# $OLD: record its hash in docs/results.md (research checkpoints not in the tree), then git rm its
# weights, moving its card, measured.json, simspec.json and history.json to research/runs/bench/research-heads/.
# Resumable: a step is skipped when its output already describes today's `eagle` (traces carry
# the drafter's fingerprint, profiles their traces' hash, policies their profile's inputs hash),
# so rerunning the script after a stop goes on where it stopped. Steps marked (timed) measure
# latency: run the script alone on the machine. ~3.5 h on the Xeon in all, most of it the T = 1
# traces (~40 min), the lossless grid (~60 min, one thread) and the policies (~30 min).
# Steps 1-4 are what the tests and `validate --real` check against the drafter's fingerprint:
# commit only after step 4, never between the rename and it. Steps 5 (card, lossless grid) are
# records: GRID=0 stops before them, for a later session to run.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"   # .venv/bin/simspec when there is one, else simspec on PATH
NEW=${NEW:?name the folder of the new head: NEW=real/drafters/...}
OLD=${OLD:-real/drafters/eagle-stage3}

if [[ -d $NEW ]]; then
  [[ -e $OLD ]] && { echo "ship-head: $OLD exists; name the old head's new folder with OLD=..." >&2; exit 2; }
  git mv real/drafters/eagle "$OLD"
  git mv "$NEW" real/drafters/eagle
fi

# fresh KIND PATH [PROFILE]: 0 when PATH already describes today's eagle, by the loaders' own checks.
#   traces PATH           they carry the fingerprint of the drafter they name, as it is now
#   profile PATH          its traces pass the profile's own check (content hash) and are fresh
#   policy PATH PROFILE   it was trained on PROFILE as it is now (inputs hash)
fresh() {
  python - "$@" <<'EOF'
import sys
from simspec.errors import SimspecError
from simspec.fingerprint import check_fingerprint
from simspec.policies.artifact import read_policy_meta
from simspec.sim.profile import load_profile
from simspec.sim.trace_files import load_traces

def fresh_traces(traces):
    recorded = traces.meta.get("draft_fingerprint")  # None: made before fingerprints, so not provably fresh
    check_fingerprint(recorded, traces.meta["draft"], "traces")
    return recorded is not None

kind, path = sys.argv[1], sys.argv[2]
try:
    if kind == "traces":
        ok = fresh_traces(load_traces(path))
    elif kind == "profile":
        ok = fresh_traces(load_profile(path).traces())
    else:
        ok = read_policy_meta(path)[1]["profile"]["inputs_hash"] == load_profile(sys.argv[3]).meta["inputs_hash"]
except (SimspecError, KeyError):
    ok = False
sys.exit(0 if ok else 1)
EOF
}
step() { echo "== ship-head: $*" >&2; }

# 1. Greedy HumanEval traces (no timing: may share the machine) and the profiles that name them.
fresh traces calibration/traces-humaneval-eagle || { step "greedy traces"
  simspec calibrate --traces-only --n-prompts 164 --max-new-tokens 128 --check-prompts 4 \
      --out calibration/traces-humaneval-eagle --json --force; }
fresh profile calibration/cpu-demo || { step "cpu-demo (timed)"
  simspec calibrate --gpu cpu --traces-from calibration/traces-humaneval-eagle --out calibration/cpu-demo --json --force
  simspec plot curves --profile calibration/cpu-demo --force; }
fresh profile calibration/cpu-demo-insitu || { step "cpu-demo-insitu (timed)"
  simspec recalibrate --profile calibration/cpu-demo --out calibration/cpu-demo-insitu --json --force; }
fresh profile calibration/cpu-demo-1t || { step "cpu-demo-1t (timed)"
  simspec calibrate --gpu cpu --traces-from calibration/traces-humaneval-eagle --threads 1 \
      --out calibration/cpu-demo-1t --json --force; }
fresh profile calibration/cpu-demo-batch || { step "cpu-demo-batch (timed)"
  simspec calibrate --gpu cpu --batch-sizes 1,2,4,8 --traces-from calibration/traces-humaneval-eagle \
      --out calibration/cpu-demo-batch --json --force; }
for gpu in a100 h100; do
  fresh profile "calibration/$gpu-demo-analytic" || { step "$gpu-demo-analytic"
    simspec calibrate --gpu "$gpu" --traces-from calibration/traces-humaneval-eagle \
        --out "calibration/$gpu-demo-analytic" --json --force; }
done

# 2. The shipped policies on cpu-demo, and the simulator's table of them.
fresh policy policies/ltd-cpu-demo calibration/cpu-demo || { step "LTD"
  simspec train --simulated --profile calibration/cpu-demo --algo ltd --preset fast --out policies/ltd-cpu-demo \
      --json --force; }
fresh policy policies/resps-cpu-demo calibration/cpu-demo || { step "Re-SpS"
  simspec train --simulated --profile calibration/cpu-demo --algo resps --threads 1 --json --force; }
fresh policy policies/resps-maxent-cpu-demo calibration/cpu-demo || { step "Re-SpS max-entropy"
  simspec train --simulated --profile calibration/cpu-demo --algo resps --variant maxent --threads 1 --json --force; }
fresh policy policies/radar-cpu-demo calibration/cpu-demo || { step "RADAR"
  simspec train --simulated --profile calibration/cpu-demo --algo radar --threads 1 --json --force; }
for name in ltd resps resps-maxent radar; do simspec plot training --policy "policies/$name-cpu-demo" --force; done
simspec validate --simulated --profile calibration/cpu-demo --json | tee research/runs/bench/validate-sim-cpu-demo.txt
simspec validate --simulated --profile calibration/cpu-demo --json \
    --policies policies/ltd-cpu-demo,policies/resps-cpu-demo,policies/resps-maxent-cpu-demo,policies/radar-cpu-demo \
    | tee research/runs/bench/validate-sim-cpu-demo-policies.txt

# 3. T = 1: sampled traces with node probabilities, their profile, RADAR and LTD on it.
fresh traces calibration/traces-humaneval-eagle-T1 || { step "T = 1 traces"
  simspec calibrate --traces-only --temperature 1 --n-prompts 40 --out calibration/traces-humaneval-eagle-T1 --force; }
fresh profile calibration/cpu-demo-T1 || { step "cpu-demo-T1 (timed)"
  simspec calibrate --gpu cpu --temperature 1 --traces-from calibration/traces-humaneval-eagle-T1 \
      --out calibration/cpu-demo-T1 --json --force; }
fresh policy policies/radar-cpu-demo-T1 calibration/cpu-demo-T1 || { step "RADAR T = 1"
  simspec train --simulated --profile calibration/cpu-demo-T1 --algo radar --threads 1 --json --force; }
fresh policy policies/ltd-cpu-demo-T1 calibration/cpu-demo-T1 || { step "LTD T = 1"
  simspec train --simulated --profile calibration/cpu-demo-T1 --algo ltd --preset fast --out policies/ltd-cpu-demo-T1 \
      --json --force; }
for name in radar ltd; do simspec plot training --policy "policies/$name-cpu-demo-T1" --force; done
simspec validate --simulated --profile calibration/cpu-demo-T1 --temperature 1 --json \
    --policies policies/ltd-cpu-demo,policies/ltd-cpu-demo-T1,policies/radar-cpu-demo,policies/radar-cpu-demo-T1 \
    | tee research/runs/bench/validate-sim-cpu-demo-T1.txt

# 4. The draft-selection study's EAGLE-3 traces and profile (the LM's and tl6's describe other drafters).
fresh traces calibration/traces-mix-eagle || { step "mixed-set traces"
  simspec calibrate --traces-only --draft eagle --prompts humaneval+sharegpt --n-prompts 64 --max-new-tokens 64 \
      --out calibration/traces-mix-eagle --force; }
fresh profile calibration/cpu-mix-eagle || { step "cpu-mix-eagle (timed)"
  simspec calibrate --gpu cpu --draft eagle --traces-from calibration/traces-mix-eagle --out calibration/cpu-mix-eagle \
      --force; }

[[ ${GRID:-1} == 0 ]] && { step "stopped before the card and the lossless grid (GRID=0)"; exit 0; }

# 5. The card, and the lossless grid (outputs, not timings: one thread; resumable by chunk).
simspec drafter-card --draft eagle --json | tee research/runs/bench/eagle3-card-fp32.txt
grid=research/runs/bench/lossless-grid-eagle
fp=$(python -c 'from simspec.fingerprint import drafter_fingerprint as f; print(f("eagle"))')
[[ "$(cat "$grid/FINGERPRINT" 2>/dev/null)" == "$fp" ]] || { rm -rf "$grid"; mkdir -p "$grid"; echo "$fp" > "$grid/FINGERPRINT"; }
THREADS=${THREADS:-1} bash scripts/lossless-grid.sh "$grid" eagle 16
python3 scripts/summarise-grid.py "$grid" "$grid.json"
