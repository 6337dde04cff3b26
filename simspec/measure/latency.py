"""``simspec latency``: one request in, latency tables out (measured by ``simspec.measure.profiler``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from simspec import __version__, flags
from simspec.engine.formats import draft_help
from simspec.flags import opt


@dataclass(frozen=True, kw_only=True)
class LatencyRequest:
    target: str = flags.target()
    draft: str = flags.draft(draft_help)
    sizes: tuple[int, ...] = flags.tree_sizes((1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128), parse=flags.sizes)
    contexts: tuple[int, ...] = opt((64, 256, 1024), "Context lengths L already in the KV cache.", parse=flags.sizes)
    widths: tuple[int, ...] = flags.tree_widths((1, 2, 4, 6, 8, 10), parse=flags.sizes)
    repeats: int = flags.repeats(7, min=3)
    device: str = flags.device()
    dtype: str = flags.dtype()
    runtime: str = flags.runtime()


def measure_latency(request: LatencyRequest, bar: Callable[[str, int], Callable[..., None]],
                    status: Callable[[str], object]) -> dict:
    """One target forward vs V and L, one draft step vs W and L; returns the ``--json`` summary."""
    import torch

    from simspec.engine.load import load_pair
    from simspec.engine.models import resolve_device
    from simspec.engine.runtime import check_runtime, compiled_mode
    from simspec.measure.profiler import draft_latency, memory_bandwidth, target_latency, weight_bytes

    r = request
    check_runtime(r.runtime)
    loaded, drafter = load_pair(r.target, r.draft, resolve_device(r.device), status, r.dtype)
    tick = bar("latency", len(r.contexts) * (len(r.sizes) + len(r.widths)))
    verify = target_latency(loaded, r.sizes, r.contexts, r.repeats, tick, r.runtime)
    drafts = draft_latency(drafter, loaded.model.config.vocab_size, r.widths, r.contexts, r.repeats, loaded.device,
                           tick)
    plain = {c: x for x in target_latency(loaded, [1], r.contexts, r.repeats, runtime=r.runtime) for c in [x.context]}
    with status("measuring memory bandwidth"):
        bandwidth = memory_bandwidth(loaded.device)
    weights = weight_bytes(loaded.model)
    return {"target": r.target, "draft": r.draft, "device": str(loaded.device), "threads": torch.get_num_threads(),
            "dtype": r.dtype, "runtime": r.runtime, "simspec_version": __version__,
            "compile_mode": compiled_mode(loaded),
            "plain_decoding": {"ms_per_token": {str(c): x.median * 1e3 for c, x in plain.items()},
                               "weight_bytes": weights, "bandwidth_gbs": bandwidth / 1e9,
                               "memory_floor_ms": weights / bandwidth * 1e3},
            "samples": [x.to_dict() for x in verify + drafts]}
