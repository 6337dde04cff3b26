"""``simspec plot``: each figure drawn from the artifacts the user names, an existing one refused
before any is loaded (its name comes from the folder named, not from its contents)."""

from __future__ import annotations

import json
from pathlib import Path

from simspec.errors import SimspecError


def _folder(path: str, *files: str) -> Path:
    """The artifact folder ``path`` names (or the folder of one of its ``files``): its figure's name."""
    from simspec.shipped import locate

    located = locate(path)
    return located.parent if located.name in files else located


def curves(profile: str, out: str, *, force: bool = False) -> tuple[Path, bool]:
    """Latency curves with the fitted cost model, and whether the profile is analytic."""
    from simspec.report.plots import curves_file, plot_curves, refuse_existing
    from simspec.sim.profile import load_profile

    refuse_existing([curves_file(Path(out), _folder(profile, "profile.json").name)], force)
    loaded = load_profile(profile)
    return plot_curves(loaded, Path(out), force=force), loaded.kind == "analytic"


def surface(profile: str, split: str, max_new_tokens: int | None, out: str, *, force: bool = False) -> Path:
    """Simulated speedup of every static (D, V) tree, the grid best and the oracle marked."""
    import numpy as np

    from simspec.report.plots import plot_surface, refuse_existing, surface_file
    from simspec.sim.evaluate import check_split, split_traces, static_surface
    from simspec.sim.oracle import oracle
    from simspec.sim.profile import load_profile

    check_split(split)
    refuse_existing([surface_file(Path(out), _folder(profile, "profile.json").name, split)], force)
    loaded = load_profile(profile)
    traces = split_traces(loaded.traces(), split)
    cells = {k: float(np.mean(v.speedup)) for k, v in static_surface(traces, loaded.cost, max_new_tokens).items()}
    best = float(np.mean(oracle(traces, loaded.cost, max_new_tokens).speedup))
    return plot_surface(loaded, cells, best, Path(out), split, force=force)


def training(policy: str, out: str, *, force: bool = False) -> Path:
    """A policy's training curves, from its training.csv."""
    from simspec.policies.artifact import read_policy_meta
    from simspec.report.plots import plot_training, refuse_existing, training_file
    from simspec.train.log import read_csv

    refuse_existing([training_file(Path(out), _folder(policy, "policy.json", "policy.npz").name)], force)
    directory, meta = read_policy_meta(policy)
    try:
        rows = read_csv(directory / "training.csv")
    except FileNotFoundError:
        raise SimspecError(f"{directory} has no training.csv: retrain the policy with `simspec train`") from None
    except (OSError, KeyError, ValueError) as exc:
        raise SimspecError(f"{directory / 'training.csv'} is unreadable ({exc.__class__.__name__}): retrain") from None
    return plot_training(directory.name, meta, rows, Path(out), force=force)


def validation(report: str, out: str | None, method: str | None, *, force: bool = False) -> list[Path]:
    """A real validation's figures, redrawn from its report.json (plus ``method``'s action map)."""
    from simspec.report.plots import plot_validation
    from simspec.report.validation import read_report

    path = Path(report)
    loaded = read_report(path)
    folder = Path(out) if out else (path if path.is_dir() else path.parent)
    names = [r.method for r in loaded.rows]
    if method and method not in names:  # before drawing anything: a refused request writes nothing
        raise SimspecError(f"--method {method!r} is not in that report: choose one of {', '.join(names)}")
    return plot_validation(loaded, folder, method or None, force=force)


def _summary_folder(summary: dict, out: str, force: bool, stem: str, figures=()) -> list[str]:
    """A new folder of ``STEM.json`` (the summary) and each of ``figures``, (file name, draw, what it
    draws) as ``draw(data, path)``; the paths written."""
    from simspec.cache import atomic_directory

    names = [f"{stem}.json"]
    with atomic_directory(Path(out), replace=force) as tmp:
        (tmp / names[0]).write_text(json.dumps(summary, indent=1) + "\n")
        names += [draw(data, tmp / name).name for name, draw, data in figures]
    return [str(Path(out) / name) for name in names]


def headroom_folder(summary: dict, out: str, force: bool) -> list[str]:
    """``simspec headroom --out``: ``headroom.json`` and ``headroom.png``."""
    from simspec.report.plots import plot_headroom

    return _summary_folder(summary, out, force, "headroom", [("headroom.png", plot_headroom, summary)])


def load_sweep_folder(summary: dict, out: str, force: bool) -> list[str]:
    """``simspec load --sweep --out``: ``load-sweep.json`` and, per profile with two or more rates,
    ``load-N.png`` (N: the profile's place in the sweep, from 1)."""
    from simspec.report.plots import plot_load

    figures = [(f"load-{n}.png", plot_load, p) for n, p in enumerate(summary["profiles"], 1) if _rated(p)]
    return _summary_folder(summary, out, force, "load-sweep", figures)


def load_folder(summary: dict, out: str, force: bool) -> list[str]:
    """``simspec load --out``: ``load.json`` and, where two or more streams have a rate, ``load.png``."""
    from simspec.report.plots import plot_load

    return _summary_folder(summary, out, force, "load", [("load.png", plot_load, summary)] if _rated(summary) else [])


def _rated(summary: dict) -> bool:
    """Whether two or more of a load summary's streams have a rate: a figure against the rate."""
    return len({v["stream"].get("rate") for v in summary["verdicts"]} - {None}) >= 2
