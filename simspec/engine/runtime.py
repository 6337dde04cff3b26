"""The engine's runtimes. ``eager``: the Hugging Face forwards as they are. ``compiled``: the
target's forward under ``torch.compile`` over a static, full-capacity KV cache, in a few shape
buckets (tokens padded to a power of two, capacity to a multiple of ``CAPACITY_STEP``), so a run
compiles a handful of graphs and then replays them (``compiled_rows.CompiledTargetRows``).

On a CPU: inductor's freezing (prepacked constant weights) and C++ GEMM templates
(``max-autotune-no-cudagraphs``; ``SIMSPEC_COMPILE_MODE=default`` keeps ATen's GEMMs, compiling
in half the time); on CUDA ``reduce-overhead``, a CUDA graph per bucket. Compiling costs tens
of seconds per bucket on a CPU, once per process (frozen graphs are not cached across
processes); ``CompiledForward.compile_s`` counts it for the reports."""

from __future__ import annotations

import logging
import os
import time
import warnings
import weakref
from typing import TYPE_CHECKING

from simspec.errors import SimspecError
from simspec.shapes import next_power_of_two

if TYPE_CHECKING:  # torch loads with the models, not with a request's checks
    import torch

RUNTIMES = ("eager", "compiled")
# cache capacities are rounded up to this: a new capacity is a new graph, and attention reads the
# whole capacity (1024 slots cost 24 ms per plain step where 256 cost 19.5: docs/results/engine.md#compiled-runtime)
CAPACITY_STEP = 256
MAX_BUCKET = 512  # kv_rows.TREE_SLOTS: the slack every speculative cache has

# torch.compile's mode on a CPU, from SIMSPEC_COMPILE_MODE: the first is the default
CPU_MODES = ("max-autotune-no-cudagraphs", "default")
MODE_VARIABLE = "SIMSPEC_COMPILE_MODE"

log = logging.getLogger("simspec")


def check_runtime(name: str) -> str:
    """``name`` if it is a runtime (and, compiled, its mode one torch knows); else one error line."""
    if name not in RUNTIMES:
        raise SimspecError(f"--runtime must be one of {', '.join(RUNTIMES)}, got {name!r}")
    if name == "compiled":
        compile_mode("cpu")
    return name


def compile_mode(device: str) -> str:
    """The compiled runtime's ``torch.compile`` mode on ``device`` (module docstring)."""
    if str(device).startswith("cuda"):
        return "reduce-overhead"
    mode = os.environ.get(MODE_VARIABLE) or CPU_MODES[0]
    if mode not in CPU_MODES:
        raise SimspecError(f"{MODE_VARIABLE} must be one of {', '.join(CPU_MODES)}, got {mode!r}")
    return mode


def bucket(n: int) -> int:
    """The padded token count a compiled forward of ``n`` tokens runs at: the next power of two."""
    if n > MAX_BUCKET:
        raise SimspecError(f"a compiled forward takes at most {MAX_BUCKET} tokens, got {n}: use --runtime eager")
    return next_power_of_two(n)


def capacity_bucket(n: int) -> int:
    """The cache capacity for ``n`` slots (callers count a bucket's padded tail in ``n``)."""
    return -(-n // CAPACITY_STEP) * CAPACITY_STEP


class CompiledForward:
    """A decoder stack's forward under ``torch.compile``, shared by every sequence an engine
    decodes. Calls with a new shape compile first; ``compile_s`` sums those first calls."""

    def __init__(self, base: torch.nn.Module) -> None:
        import torch
        import torch._dynamo.config as dynamo_config
        import torch._inductor.config as inductor_config

        # inductor's own code reads tensor.storage(), and torch warns about it on every compile
        warnings.filterwarnings("ignore", message="TypedStorage is deprecated", category=UserWarning)
        inductor_config.freezing = True  # weights as constants: prepacked GEMMs on a CPU
        inductor_config.autotune_num_choices_displayed = 0  # autotuning's tables go to stderr otherwise
        inductor_config.max_autotune_report_choices_stats = False
        # each (bucket, capacity) is a graph of the same code object; dynamo's default limit (8)
        # would fall back to eager silently past it
        dynamo_config.recompile_limit = max(dynamo_config.recompile_limit, 64)
        self.cuda = next(base.parameters()).is_cuda
        self.mode = compile_mode("cuda" if self.cuda else "cpu")
        self.fn = torch.compile(base.forward, dynamic=False, mode=self.mode)
        self.config = base.config
        self.caches: dict[tuple[int, int], object] = {}  # (batch, capacity) -> its cache
        # (tokens, capacity, hidden states kept[, batch]): one graph each
        self.shapes: set[tuple] = set()
        self.compile_s = 0.0

    def cache(self, capacity: int, batch: int = 1):
        """The one KV cache of ``batch`` rows of ``capacity`` slots every batch of this model decodes
        in, reset: a graph reads the buffers it was compiled with, so a fresh cache would go unread."""
        from transformers import StaticCache

        if (batch, capacity) not in self.caches:
            self.caches[batch, capacity] = StaticCache(config=self.config, max_cache_len=capacity)
        cache = self.caches[batch, capacity]
        for layer in cache.layers:
            if layer.is_initialized:
                layer.cumulative_length.fill_(0)
        return cache

    def __call__(self, shape: tuple, **kwargs):
        """``fn(**kwargs)``; ``shape`` names the graph it runs (tokens, capacity, hidden states kept)."""
        if shape in self.shapes:
            return self.fn(**kwargs)
        log.info("compiling the target's forward for %s tokens over %s cache slots (once per process)", *shape[:2])
        started = time.perf_counter()
        out = self.fn(**kwargs)
        if self.cuda:
            import torch

            torch.cuda.synchronize()
        self.compile_s += time.perf_counter() - started
        self.shapes.add(shape)
        return out


_COMPILED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # decoder stack -> CompiledForward


def compiled_forward(base: torch.nn.Module) -> CompiledForward:
    """The one ``CompiledForward`` of ``base`` in this process (engines over the same loaded
    model share its graphs)."""
    if base not in _COMPILED:
        _COMPILED[base] = CompiledForward(base)
    return _COMPILED[base]


def _compiled(target) -> CompiledForward | None:
    from simspec.engine.modeling import base_and_head

    return _COMPILED.get(base_and_head(target.model)[0])


def compiled_mode(target) -> str | None:
    """The ``torch.compile`` mode this process compiled ``target``'s forwards in (None if none)."""
    return None if _compiled(target) is None else _compiled(target).mode


def compiled_seconds(target) -> float:
    """Seconds this process has spent compiling ``target``'s forwards (a ``LoadedModel``; 0 if none)."""
    return 0.0 if _compiled(target) is None else _compiled(target).compile_s
