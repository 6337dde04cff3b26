#!/usr/bin/env bash
# docs/results.md "Sweeps": LTD and RADAR (preset fast), seeds 1 and 2, on the shipped profile,
# one after another and as Ray Tune trials on a local Ray instance (2 at a time, one torch
# thread each); then the networks of every trial compared between the two sweeps.
# Writes /tmp/simspec-sweep/{plain,ray}/ (not shipped). About 20 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
OUT=${OUT:-/tmp/simspec-sweep}
ARGS=(sweep --profile calibration/cpu-demo --algos ltd,radar --seeds 1,2 --preset fast --force --json)
/usr/bin/time -f "plain: %e s" simspec "${ARGS[@]}" --out "$OUT/plain" | tail -1
/usr/bin/time -f "ray: %e s" simspec "${ARGS[@]}" --out "$OUT/ray" --ray local --workers 2 | tail -1
python3 - "$OUT" <<'PY'
import sys, numpy as np
from pathlib import Path
out = Path(sys.argv[1])
for trial in sorted(p.name for p in (out / "plain").iterdir() if p.is_dir()):
    a, b = (np.load(out / side / trial / "policy.npz") for side in ("plain", "ray"))
    same = a.files == b.files and all(np.array_equal(a[k], b[k]) for k in a.files)
    print(f"{trial}: {'identical networks' if same else 'DIFFERENT networks'}")
PY
