"""Measurement on real models: latency curves, traces, in-situ refits, real runs against plain decoding."""

from collections.abc import Callable

Bar = Callable[[str, int], Callable[..., None]]  # a progress bar: bar(description, total) -> advance(n=1)
