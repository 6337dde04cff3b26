#!/usr/bin/env bash
# docs/simulator.md "Ten-minute streams of chat": held-out ShareGPT first turns under Poisson
# arrivals at a light, a medium and a saturating rate through 4 rows, plain decoding and the
# D 4 V 8 tree, each stream 10 minutes, on the live engine beside the replay that predicts it
# (the curves at 4 rows refitted in situ first). Run it alone: it measures time (80 min on the
# 2-core EPYC-Z4, 2026-12-06: traces 7.6, calibration 5, refit and streams 65). Writes
# calibration/traces-sharegpt-eagle/, calibration/cpu-sharegpt-batch/ (both ship; FORCE=--force
# replaces them) and research/runs/load/sharegpt-B4-600s/ (load.json, kept gzipped, and load.png).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PWD/.venv/bin:$PATH"
[[ -e calibration/traces-sharegpt-eagle/traces.json && -z "${FORCE:-}" ]] ||
    simspec calibrate --draft eagle --prompts sharegpt --n-prompts 64 --max-new-tokens 64 --depth-max 8 \
        --traces-only --check-prompts 2 --out calibration/traces-sharegpt-eagle --json ${FORCE:-}
[[ -e calibration/cpu-sharegpt-batch/profile.json && -z "${FORCE:-}" ]] ||
    simspec calibrate --gpu cpu --traces-from calibration/traces-sharegpt-eagle --batch-sizes 1,4 --quick \
        --out calibration/cpu-sharegpt-batch --json ${FORCE:-}
simspec load --profile calibration/cpu-sharegpt-batch --max-batch 4 --rates 0.1,0.3,0.6 --duration 600 \
    --baselines static:4,8 --max-new-tokens 48 --live --recalibrate --out research/runs/load/sharegpt-B4-600s \
    --json ${FORCE:-}
