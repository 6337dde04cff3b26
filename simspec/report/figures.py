"""``simspec plot``: each figure drawn from the artifacts it needs, by what the user names."""

from __future__ import annotations

from pathlib import Path

from simspec.errors import SimspecError


def curves(profile: str, out: str) -> tuple[Path, bool]:
    """Latency curves with the fitted cost model; returns the figure and whether the profile is
    analytic."""
    from simspec.report.plots import plot_curves
    from simspec.sim.profile import load_profile

    loaded = load_profile(profile)
    return plot_curves(loaded, Path(out)), loaded.kind == "analytic"


def surface(profile: str, split: str, max_new_tokens: int | None, out: str) -> Path:
    """Simulated speedup of every static (D, V) tree, the grid best and the oracle marked."""
    import numpy as np

    from simspec.report.plots import plot_surface
    from simspec.sim.evaluate import check_split, split_traces, static_surface
    from simspec.sim.oracle import oracle
    from simspec.sim.profile import load_profile

    check_split(split)
    loaded = load_profile(profile)
    traces = split_traces(loaded.traces(), split)
    cells = {k: float(np.mean(v.speedup)) for k, v in static_surface(traces, loaded.cost, max_new_tokens).items()}
    best = float(np.mean(oracle(traces, loaded.cost, max_new_tokens).speedup))
    return plot_surface(loaded, cells, best, Path(out), split)


def training(policy: str, out: str) -> Path:
    """A policy's training curves, from its training.csv."""
    from simspec.policies.artifact import read_policy_meta
    from simspec.report.plots import plot_training
    from simspec.train.log import read_csv

    directory, meta = read_policy_meta(policy)
    try:
        rows = read_csv(directory / "training.csv")
    except FileNotFoundError:
        raise SimspecError(f"{directory} has no training.csv: retrain the policy with `simspec train`") from None
    except (OSError, KeyError, ValueError) as exc:
        raise SimspecError(f"{directory / 'training.csv'} is unreadable ({exc.__class__.__name__}): retrain") from None
    return plot_training(directory.name, meta, rows, Path(out))


def validation(report: str, out: str | None, method: str | None) -> list[Path]:
    """A real validation's figures, redrawn from its report.json (plus ``method``'s action map)."""
    from simspec.report.plots import plot_action_map, plot_validation
    from simspec.report.validation import read_report

    path = Path(report)
    loaded = read_report(path)
    folder = Path(out) if out else (path if path.is_dir() else path.parent)
    names = [r["method"] for r in loaded["rows"]]
    if method and method not in names:  # before drawing anything: a refused request writes nothing
        raise SimspecError(f"--method {method!r} is not in that report: choose one of {', '.join(names)}")
    paths = plot_validation(loaded, folder)
    if method:
        paths.append(plot_action_map(loaded, method, folder))
    return paths
