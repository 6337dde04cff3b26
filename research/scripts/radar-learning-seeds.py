"""The margins behind tests/test_train.py's LEARNING_RADAR: for each seed, RADAR trained on the
shipped cpu-demo profile under a schedule, then its held-out median speedup against the grid best's,
each charged its decision time as the test charges it. Training runs differ between CPU kinds by
float rounding, so the spread over seeds stands for the spread over machines.

    .venv/bin/python research/scripts/radar-learning-seeds.py UPDATES BATCH LR VALIDATIONS SEEDS
    e.g. ... 800 512 1.5e-3 2 0,2,4,...  (two processes, odd and even seeds, on 2 cores)"""

import sys
import time
from pathlib import Path

import numpy as np
import torch

from simspec.sim.evaluate import grid_policy
from simspec.sim.profile import load_profile
from simspec.sim.replay import replay
from simspec.train.log import TrainingLog
from simspec.train.radar import RADAR_TIMING_KEY, RadarConfig, train_radar
from simspec.train.setting import prepare

torch.set_num_threads(1)  # as the test
updates, batch, lr, validations = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
config = RadarConfig(updates=updates, batch=batch, learning_rate=lr, validations=validations)
profile = load_profile(Path("calibration/cpu-demo"))
per_call, static = (profile.meta.policy_seconds[k] for k in (RADAR_TIMING_KEY, "static"))
for seed in (int(x) for x in sys.argv[5].split(",")):
    s = prepare(profile, "throughput", seed=seed)

    def heldout(policy, per_cycle=None) -> float:
        if per_cycle is None:  # RADAR: per call, at the calls per cycle it makes there
            first = replay(s.heldout, s.cost, policy, s.max_new_tokens)
            per_cycle = per_call * (first.draft_calls.sum() / first.cycles.sum() + 1)
        return float(np.median(replay(s.heldout, s.cost, policy, s.max_new_tokens, per_cycle).speedup))

    grid = heldout(grid_policy(s.grid_depth, s.width, s.grid_size), static)
    started = time.perf_counter()
    trained = heldout(train_radar(s, config, TrainingLog(), lambda n: None, per_call).policy)
    print(f"seed {seed}: grid {grid:.4f} trained {trained:.4f} margin {trained - grid:+.4f} "
          f"({time.perf_counter() - started:.1f} s)", flush=True)
