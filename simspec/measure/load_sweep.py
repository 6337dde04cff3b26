"""``simspec load --sweep`` (and ``--ray``): the same streams and methods under several profiles (a
measured CPU beside the analytic A100, H100 and H200, say), every (profile, rate) served as a load
run of its own: in turn in this process, or as Ray tasks. The simulator is deterministic, so a
task's rows do not depend on where it ran; each profile's are merged into one summary, as a single
``simspec load`` would have written it."""

from __future__ import annotations

from dataclasses import replace

from simspec import __version__

MAX_FAILURES = 2  # a task's retries on Ray before the sweep stops


def parts(request) -> list:
    """One load request per (profile, rate) (per profile for a ``--stream`` file), simulated, writing nothing."""
    rates = [request.rates] if request.stream else [(rate,) for rate in request.rates]
    return [replace(request, profile=profile, rates=these, sweep=(), ray=None, out=None, force=False)
            for profile in (request.profile, *request.sweep) for these in rates]


def serve(request, bar, status) -> dict:
    """``simspec load``: one profile (``simspec.measure.load.run``), or with ``--sweep``/``--ray``
    every (profile, rate) served and merged per profile; with ``--out``, written to a new folder."""
    from simspec.cache import check_out
    from simspec.measure.load import run
    from simspec.report.figures import load_sweep_folder

    if not (request.sweep or request.ray is not None):
        return run(request, bar, status)
    if request.out:
        check_out(request.out, request.force)
    summary = sweep(request, status)
    if request.out:
        summary["written"] = load_sweep_folder(summary, request.out, request.force)
    return summary


def serve_part(part) -> dict:
    """One part's ``simspec load`` summary, without progress output (a Ray task runs it too)."""
    import contextlib

    from simspec.measure.load import run

    return run(part, lambda *a, **k: lambda *a, **k: None, lambda text: contextlib.nullcontext())


def merged(summaries: list[dict]) -> dict:
    """A profile's parts as one summary: the first's description, every part's rows, verdicts and surface."""
    first = summaries[0]
    return {**first, **{key: [item for s in summaries for item in s[key]] for key in ("rows", "verdicts", "surface")}}


def sweep(request, status) -> dict:
    """Every part served (``--ray``: as Ray tasks), merged per profile; the profiles checked before any runs."""
    from simspec.sim.profile import load_profile

    for profile in (request.profile, *request.sweep):  # a bad one fails here, before any task starts
        loaded = load_profile(profile)
        loaded.require_temperature(request.temperature)
        loaded.cost.at_batch(request.max_batch)
    todo = parts(request)
    if request.ray is None:
        with status(f"{len(todo)} load runs ({len(request.sweep) + 1} profiles), one after another"):
            done = [serve_part(part) for part in todo]
    else:
        done = _on_ray(request, todo, status)
    by_profile: dict[str, list[dict]] = {}
    for part, summary in zip(todo, done):
        by_profile.setdefault(part.profile, []).append(summary)
    return {"schema": "simspec-load-sweep", "schema_version": 1, "simspec_version": __version__,
            "ray": request.ray, "runs": len(todo), "profiles": [merged(s) for s in by_profile.values()]}


def _on_ray(request, todo: list, status) -> list[dict]:
    from simspec.cluster import connect, failed

    ray, _ = connect(request.ray, request.workers, 1)
    task = ray.remote(num_cpus=1, max_retries=MAX_FAILURES, retry_exceptions=True)(serve_part)
    pending = [task.remote(part) for part in todo]
    with status(f"{len(todo)} load runs as Ray tasks ({request.ray})"):
        try:
            return ray.get(pending)
        except ray.exceptions.RayError as exc:
            raise failed(ray, exc, pending, "a load run", MAX_FAILURES) from None
