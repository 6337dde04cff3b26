"""A linear layer of the demo target's MLP (8 tokens x 576 -> 1536) in bf16 against fp32, on
this CPU, interleaved: five rounds of 200 calls each, alternating which dtype goes first. Where
the CPU lacks AVX512-BF16 and AMX, bf16 is emulated (simspec.engine.models.emulated_bf16).

    .venv/bin/python research/scripts/bf16-linear-cost.py"""

import time

import numpy as np
import torch

from simspec.engine.models import native_bf16
from simspec.machine import device_model

torch.set_num_threads(2)
x32, w32 = torch.randn(8, 576), torch.randn(1536, 576)
inputs = {"fp32": (x32, w32), "bf16": (x32.bfloat16(), w32.bfloat16())}
seconds = {name: [] for name in inputs}
for x, w in inputs.values():  # warm-up
    for _ in range(20):
        torch.nn.functional.linear(x, w)
for rep in range(5):
    for name in (("fp32", "bf16") if rep % 2 == 0 else ("bf16", "fp32")):
        x, w = inputs[name]
        started = time.perf_counter()
        for _ in range(200):
            torch.nn.functional.linear(x, w)
        seconds[name].append((time.perf_counter() - started) / 200)
ratio = [b / f for b, f in zip(seconds["bf16"], seconds["fp32"])]
when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
print(f"{device_model('cpu')}, native bf16: {native_bf16()}, 2 threads, {when}")
print(f"fp32 {np.median(seconds['fp32']) * 1e6:.0f} us, bf16 {np.median(seconds['bf16']) * 1e6:.0f} us; "
      f"bf16 / fp32 median {np.median(ratio):.2f} (range {min(ratio):.2f}-{max(ratio):.2f})")
