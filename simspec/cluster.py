"""Ray, the optional extra (``pip install "simspec[ray]"``): finding it, starting or joining a cluster."""

from __future__ import annotations

from simspec import flags
from simspec.errors import SimspecError


def require_ray():
    try:
        import ray
    except ImportError:
        raise SimspecError('--ray needs Ray, an optional extra: pip install "simspec[ray]" (or pip install '
                           '"ray")') from None
    return ray


def check_ray(request) -> None:
    """A request's ``--ray`` (Ray importable) and ``--workers`` (refused without ``--ray``, not ignored)."""
    if request.ray is not None:
        require_ray()
    elif flags.given(request, ("workers",)):
        raise SimspecError("--workers sets how many Ray tasks run at once: pass --ray too")


def connect(address: str, workers: int, threads: int):
    """Ray, started locally (``local``: room for ``workers`` tasks of ``threads`` CPUs) or joined at
    ``address``; returns the module and whether the cluster has GPUs."""
    ray = require_ray()
    if not ray.is_initialized():
        try:
            if address == "local":  # a new instance, even where one runs already (Ray's "local")
                ray.init(address="local", num_cpus=workers * threads, include_dashboard=False, log_to_driver=False,
                         configure_logging=False)
            else:
                ray.init(address=address, log_to_driver=False, configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise SimspecError(f"--ray {address}: cannot start or reach a Ray cluster ({str(exc).splitlines()[0]}): "
                               f"use --ray local, or the address `ray status` prints on the head node") from None
    return ray, ray.cluster_resources().get("GPU", 0) > 0


def failed(ray, exc: Exception, pending, what: str, retries: int) -> SimspecError:
    """``what``'s Ray task failed after its retries: the other tasks cancelled (nothing is written),
    and the one line to raise."""
    for ref in pending:
        ray.cancel(ref, force=True)
    why = (str(exc).strip().splitlines() or [exc.__class__.__name__])[-1][:160]
    return SimspecError(f"{what} failed on Ray after {retries} retries ({why}); nothing was written: run again, or "
                        "without --ray")
