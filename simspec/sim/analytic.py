"""Analytic (roofline) latency for GPUs that are not on hand: a model, not a measurement.

Every matrix multiply costs the larger of its math and memory time plus a launch overhead; the
token dimension is rounded up to the GEMM tile (the step-wise verify curve of LTD's Figure 2).
Attention reads the whole context's KV cache. Efficiency factors are the usual fractions of peak
of eager inference, stated, not fitted; device numbers are the vendors' dense fp16/bf16 peaks.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from simspec.errors import SimspecError


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    tflops: float  # dense fp16/bf16 tensor-core peak, TFLOP/s
    bandwidth_gbs: float  # HBM/GDDR bandwidth, GB/s
    launch_us: float = 5.0  # per-kernel launch + framework overhead in eager mode
    gemm_tile: int = 64  # token-dimension tile of the GEMM kernels

    def runtime(self) -> str:
        """The runtime the model prices, stated in every profile and report built on it."""
        return (f"roofline of an eager runtime: {self.launch_us:g} us launch and framework overhead per kernel, "
                f"{KERNELS_PER_LAYER} kernels per layer, token dimension tiled by {self.gemm_tile}; no CUDA graphs "
                "or fused kernels")


DEVICES = {d.name: d for d in (
    DeviceSpec("a100", 312.0, 2039.0),  # A100 SXM4 80 GB
    DeviceSpec("h100", 989.0, 3350.0),  # H100 SXM5
    DeviceSpec("h200", 989.0, 4800.0),  # H200 SXM
    DeviceSpec("a40", 149.7, 696.0),
    DeviceSpec("l4", 121.0, 300.0),
    DeviceSpec("rtx3090", 71.0, 936.0),  # fp32 accumulate
    DeviceSpec("rtx4090", 165.2, 1008.0),  # fp32 accumulate
    DeviceSpec("v100", 125.0, 900.0),  # V100 SXM2
)}
COMPUTE_EFFICIENCY = 0.6
MEMORY_EFFICIENCY = 0.8
KERNELS_PER_LAYER = 14  # norms, q/k/v/o, rope, attention, gate/up/act/down, residuals (eager HF)


def device_spec(name: str) -> DeviceSpec:
    try:
        return DEVICES[name.lower()]
    except KeyError:
        raise SimspecError(f"unknown GPU {name!r}: known ones are {', '.join(DEVICES)} (or cpu / auto)") from None


@dataclass(frozen=True)
class Architecture:
    """What latency depends on: shapes and dtype, never weight values."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int  # rows of the output head actually computed (a reduced draft vocabulary counts)
    bytes_per_param: int = 2
    input_mix: int = 0  # EAGLE-style drafters: a [input_mix * hidden -> hidden] projection first

    def to_dict(self) -> dict:
        return asdict(self)


# Public architecture numbers for the shipped analytic profiles.
LLAMA31_8B = Architecture(layers=32, hidden=4096, heads=32, kv_heads=8, intermediate=14336, vocab=128256)
# An EAGLE-3-style one-layer draft for it: fused [3 features] input, 32k draft vocabulary.
LLAMA31_8B_DRAFT = Architecture(layers=1, hidden=4096, heads=32, kv_heads=8, intermediate=14336, vocab=32000,
                                input_mix=3)


def _gemm(device: DeviceSpec, tokens: int, k: int, n: int, bytes_per_param: int) -> float:
    padded = math.ceil(tokens / device.gemm_tile) * device.gemm_tile
    math_s = 2.0 * padded * k * n / (device.tflops * 1e12 * COMPUTE_EFFICIENCY)
    memory_s = (k * n + tokens * (k + n)) * bytes_per_param / (device.bandwidth_gbs * 1e9 * MEMORY_EFFICIENCY)
    return max(math_s, memory_s) + device.launch_us * 1e-6


def forward_seconds(device: DeviceSpec, arch: Architecture, tokens: int, context: int, batch: int = 1) -> float:
    """One forward pass of ``tokens`` new tokens after ``context`` cached ones, head included, for
    each of ``batch`` sequences at once: the weights are read once for all of them, the GEMMs run
    over every sequence's tokens, and each sequence's attention reads its own KV cache."""
    kv = arch.kv_heads * (arch.hidden // arch.heads)  # the key (and value) width
    b = arch.bytes_per_param
    rows = tokens * batch
    layer = (_gemm(device, rows, arch.hidden, arch.hidden + 2 * kv, b)  # q, k, v
             + _gemm(device, rows, arch.hidden, arch.hidden, b)  # o
             + _gemm(device, rows, arch.hidden, 2 * arch.intermediate, b)  # gate, up
             + _gemm(device, rows, arch.intermediate, arch.hidden, b))  # down
    keys = context + tokens
    attention_math = 4.0 * rows * keys * arch.hidden / (device.tflops * 1e12 * COMPUTE_EFFICIENCY)
    attention_memory = 2 * batch * keys * kv * b / (device.bandwidth_gbs * 1e9 * MEMORY_EFFICIENCY)
    layer += max(attention_math, attention_memory) + (KERNELS_PER_LAYER - 4) * device.launch_us * 1e-6
    total = arch.layers * layer + _gemm(device, rows, arch.hidden, arch.vocab, b)
    if arch.input_mix:
        total += _gemm(device, rows, arch.input_mix * arch.hidden, arch.hidden, b)
    return total
