"""Ray, the optional extra (``pip install "simspec[ray]"``): finding it, starting or joining a cluster."""

from __future__ import annotations

from simspec.errors import SimspecError


def require_ray():
    try:
        import ray
    except ImportError:
        raise SimspecError('--ray needs Ray, an optional extra: pip install "simspec[ray]" (or pip install '
                           '"ray")') from None
    return ray


def connect(address: str, workers: int, threads: int):
    """Ray, started locally (``local``: room for ``workers`` tasks of ``threads`` CPUs) or joined at
    ``address``; returns the module and whether the cluster has GPUs."""
    ray = require_ray()
    if not ray.is_initialized():
        try:
            if address == "local":
                ray.init(num_cpus=workers * threads, include_dashboard=False, log_to_driver=False,
                         configure_logging=False)
            else:
                ray.init(address=address, log_to_driver=False, configure_logging=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise SimspecError(f"--ray {address}: cannot start or reach a Ray cluster ({str(exc).splitlines()[0]}): "
                               f"use --ray local, or the address `ray status` prints on the head node") from None
    return ray, ray.cluster_resources().get("GPU", 0) > 0
