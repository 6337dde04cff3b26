"""One BLAS thread around small numpy products between torch's forwards: a multi-threaded BLAS
leaves its threads spinning on the cores torch needs next (docs/validation.md)."""

from __future__ import annotations

from functools import cache

from threadpoolctl import ThreadpoolController


@cache
def _controller() -> ThreadpoolController:
    # threadpool_limits() scans every loaded library on each call (about 0.5 ms, more than a
    # two-token generation's bookkeeping); the libraries that matter (numpy's and scipy's BLAS)
    # are loaded before anything decodes, so one scan serves the process.
    return ThreadpoolController()


def one_blas_thread():
    """A context manager: BLAS libraries limited to one thread inside, restored after."""
    return _controller().limit(limits=1, user_api="blas")
