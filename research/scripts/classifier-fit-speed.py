"""The acceptance classifier's fit (simspec.policies.stopping.AcceptancePredictor.fit) at a base
commit against this checkout's, interleaved (three fits each, alternating which goes first), on
the shipped cpu-demo traces: the stopping rules' examples and the node classifier's (C2T, Bayes,
headroom's bound). Prints the seconds, their ratio and how far the fitted predictions differ.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python research/scripts/classifier-fit-speed.py [BASE]

BASE defaults to 4bf10f2, the last commit with the float64 fit."""

import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from simspec.machine import device_model
from simspec.policies.stopping import AcceptancePredictor as New
from simspec.sim.labels import acceptance_examples, node_examples
from simspec.sim.profile import load_profile

base = sys.argv[1] if len(sys.argv) > 1 else "4bf10f2"
source = subprocess.run(["git", "show", f"{base}:simspec/policies/stopping.py"], capture_output=True, text=True,
                        check=True).stdout
path = Path(tempfile.mkdtemp()) / "stopping_base.py"
path.write_text(source)
spec = importlib.util.spec_from_file_location("stopping_base", path)
module = importlib.util.module_from_spec(spec)
sys.modules["stopping_base"] = module
spec.loader.exec_module(module)
Old = module.AcceptancePredictor

traces = load_profile("calibration/cpu-demo").traces()
print(f"{device_model('cpu')}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; base {base}")
for name, (x, y, w) in {"stopping rules": acceptance_examples(traces, 60),
                        "node classifier": node_examples(traces, top=64)}.items():
    seconds, predictions = {"base": [], "this": []}, {}
    for rep in range(3):
        order = [("base", Old), ("this", New)]
        for label, cls in order if rep % 2 == 0 else order[::-1]:
            started = time.perf_counter()
            model = cls.fit(x, y, w)
            seconds[label].append(time.perf_counter() - started)
            predictions[label] = model.predict(x)
    ratio = [a / b for a, b in zip(seconds["base"], seconds["this"])]
    print(f"{name} ({len(x)} examples, {x.shape[1]} features): base {np.median(seconds['base']):.2f} s "
          f"({min(seconds['base']):.2f}-{max(seconds['base']):.2f}), this {np.median(seconds['this']):.2f} s "
          f"({min(seconds['this']):.2f}-{max(seconds['this']):.2f}), base / this median {np.median(ratio):.2f} "
          f"({min(ratio):.2f}-{max(ratio):.2f}); predictions differ by at most "
          f"{np.abs(predictions['base'] - predictions['this']).max():.1e}")
