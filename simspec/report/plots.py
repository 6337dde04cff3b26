"""Figures of profiles, policies and real runs: each rendered beside its path and renamed over it (no
half a PNG), an existing one refused unless ``force``; its name from one ``*_file`` function, so
that a caller can refuse before loading or replaying anything."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from simspec.cache import atomic_file
from simspec.errors import SimspecError
from simspec.policies.artifact import PolicyMeta, TrainedOn
from simspec.report.validation import ValidationReport
from simspec.sim.profile import FitError, Profile


def _pyplot(path: Path | None = None, force: bool = False):
    """pyplot, headless, once ``path`` (if any) is refused where it exists (unless ``force``)."""
    if path is not None:
        refuse_existing([path], force)
    import matplotlib

    matplotlib.use("Agg")  # headless: figures are files
    import matplotlib.pyplot as plt

    return plt


def curves_file(out_dir: Path, profile_name: str) -> Path:
    return Path(out_dir) / f"curves-{profile_name}.png"


def surface_file(out_dir: Path, profile_name: str, split: str) -> Path:
    return Path(out_dir) / f"surface-{profile_name}-{split}.png"


def training_file(out_dir: Path, policy_name: str) -> Path:
    return Path(out_dir) / f"training-{policy_name}.png"


def action_map_file(out_dir: Path, method: str) -> Path:
    return Path(out_dir) / f"action-map-{method.replace('/', '_')}.png"


def validation_files(report: ValidationReport, out_dir: Path, method: str | None = None) -> list[Path]:
    """What ``plot_validation`` writes: the scatter, the time breakdown, the action maps."""
    out_dir = Path(out_dir)
    return [out_dir / "sim-vs-real.png", out_dir / "time-breakdown.png",
            *(action_map_file(out_dir, m) for m in _mapped_methods(report, method))]


def _mapped_methods(report: ValidationReport, method: str | None) -> list[str]:
    """The methods whose action maps a validation's figures hold: each learned policy, and ``method``."""
    methods = [r.method for r in report.rows if r.family.startswith("policy:")]
    return methods + [method] if method is not None and method not in methods else methods


def refuse_existing(paths: list[Path], force: bool) -> None:
    """One error line, before any drawing, if a figure of ``paths`` exists (without ``force``) or cannot
    be a file: a command's figures are refused together."""
    for path in paths:
        if path.parent.exists() and not path.parent.is_dir():
            raise SimspecError(f"{path.parent} is a file, not a folder: choose another --out")
        if path.is_dir():  # os.replace cannot put a file there, --force or not
            raise SimspecError(f"{path} is a folder, not a figure: remove it or choose another --out")
    existing = [p for p in paths if p.exists()]
    if existing and not force:
        more = f" (and {len(existing) - 1} more of this command's figures)" if len(existing) > 1 else ""
        raise SimspecError(f"{existing[0]} exists{more}: pass --force to replace "
                           f"{'them' if more else 'it'}, or choose another --out")


def _save(plt, fig, path: Path, tight: bool = True) -> Path:
    """Writes ``fig`` to ``path`` atomically and closes it (on error too)."""
    try:
        if tight:  # figures with hand-placed axes (a shared colour bar) set their own layout
            fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_file(path, lambda f: fig.savefig(f, dpi=130, format=path.suffix.lstrip(".")))
    finally:
        plt.close(fig)
    return path


def plot_curves(profile: Profile, out_dir: Path, width: int | None = None, *, force: bool = False) -> Path:
    """LTD Figure 2 (left), from this profile: draft time vs depth at width W and verify time
    vs V, per measured context; dots are measurements (bars: IQR), lines the cost model."""
    path = curves_file(out_dir, profile.directory.name)
    plt = _pyplot(path, force)
    width = width or (profile.meta.traces and profile.meta.traces.width) or 10
    samples = [s for s in profile.samples if s.get("batch", 1) == 1]  # the batch-1 curves the model fits
    contexts = sorted({s["context"] for s in samples if s["kind"] == "verify"})
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    colours = plt.cm.viridis(np.linspace(0.1, 0.85, len(contexts)))
    for colour, context in zip(colours, contexts):
        draft = {s["n"]: s for s in samples if s["kind"] == "draft" and s["context"] == context}
        if 1 in draft and width in draft:
            depths = np.arange(2, 13)
            measured = draft[1]["median"] + (depths - 2) * draft[width]["median"]
            left.plot(depths, measured * 1e3, "o", color=colour, ms=4, label=f"measured, L={context}")
        fine = np.arange(1, 13)
        fitted = np.where(fine >= 2, profile.cost.draft(1, context) + np.maximum(fine - 2, 0)
                          * profile.cost.draft(width, context), 0.0)
        left.plot(fine, fitted * 1e3, "-", color=colour, lw=1, label=f"cost model, L={context}")
        verify = sorted((s for s in samples if s["kind"] == "verify" and s["context"] == context), key=lambda s: s["n"])
        v = np.array([s["n"] for s in verify])
        med = np.array([s["median"] for s in verify]) * 1e3
        err = np.array([[s["median"] - s["q25"], s["q75"] - s["median"]] for s in verify]).T * 1e3
        right.errorbar(v, med, yerr=np.maximum(err, 0), fmt="o", color=colour, ms=3, capsize=2,
                       label=f"measured, L={context}")
        grid = np.arange(1, v.max() + 1)
        right.plot(grid, profile.cost.verify(grid, context) * 1e3, "-", color=colour, lw=1,
                   label=f"cost model, L={context}")
    left.set(xlabel="draft depth D (levels, root included)", ylabel="draft time per cycle (ms)",
             title=f"draft time vs depth, W={width}")
    right.set(xlabel="verified tokens V", ylabel="target forward (ms)", title="verify time vs V")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fit = profile.meta.fit_error or FitError(median=float("nan"), p90=float("nan"))
    fig.suptitle(f"{profile.label}\ncost-model held-out error: median {fit.median:.1%}, p90 {fit.p90:.1%}", fontsize=9)
    return _save(plt, fig, path)


def plot_surface(profile: Profile, surface: dict[tuple[int, int], float], oracle_speedup: float, out_dir: Path,
                 split: str, *, force: bool = False) -> Path:
    """Mean simulated speedup of static trees over (D, V); grid best starred."""
    path = surface_file(out_dir, profile.directory.name, split)
    plt = _pyplot(path, force)
    depths = sorted({d for d, _ in surface})
    sizes = sorted({v for _, v in surface})
    grid = np.full((len(depths), len(sizes)), np.nan)
    for (d, v), value in surface.items():
        grid[depths.index(d), sizes.index(v)] = value
    fig = plt.figure(figsize=(15, 5.2))
    ax = fig.add_subplot(1, 2, 1)
    image = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
    fig.colorbar(image, ax=ax, label="mean simulated speedup over greedy")
    ax.set_xticks(range(len(sizes)), [str(v) for v in sizes], rotation=90, fontsize=7)
    ax.set_yticks(range(len(depths)), [str(d) for d in depths])
    ax.set(xlabel="verified tokens V (past a tree's node count: the whole tree)",
           ylabel="depth D (levels, root included)")
    (d, v), top = max(surface.items(), key=lambda kv: kv[1])
    ax.plot(sizes.index(v), depths.index(d), "r*", ms=14)
    ax3d = fig.add_subplot(1, 2, 2, projection="3d")
    xs, ys = np.meshgrid(np.arange(len(sizes)), np.arange(len(depths)))
    ax3d.plot_surface(xs, ys, grid, cmap="viridis", linewidth=0, antialiased=True)
    ax3d.plot_surface(xs, ys, np.full_like(grid, oracle_speedup), color="red", alpha=0.15)
    ax3d.set_xticks(range(0, len(sizes), 3), [str(v) for v in sizes[::3]], fontsize=7)
    ax3d.set_yticks(range(len(depths)), [str(d) for d in depths], fontsize=7)
    ax3d.set(xlabel="V", ylabel="D", zlabel="speedup")
    fig.suptitle(f"{profile.label}\nstatic trees, {split} prompts: grid best D={d} V={v} at {top:.3f}x (star); "
                 f"hindsight oracle {oracle_speedup:.3f}x (red plane)", fontsize=9)
    return _save(plt, fig, path)


def plot_training(name: str, meta: PolicyMeta, rows: list[dict], out_dir: Path, *, force: bool = False) -> Path:
    """LTD Figure 3 style: each rollout's mean reward per step (left) and the deployed policy's
    validation speedup (right) against environment steps, phase by phase."""
    path = training_file(out_dir, name)
    plt = _pyplot(path, force)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    phases = list(dict.fromkeys(r["phase"] for r in rows))
    colours = plt.cm.tab10(np.arange(len(phases)) % 10)
    for colour, phase in zip(colours, phases):
        reward = [(r["env_steps"], r["reward"]) for r in rows if r["phase"] == phase and r["reward"] is not None]
        checked = [(r["env_steps"], r["validation_speedup"]) for r in rows
                   if r["phase"] == phase and r["validation_speedup"] is not None]
        if reward:
            x, y = np.array(reward).T
            left.plot(x, y, color=colour, lw=1, label=phase)
        if checked:
            x, y = np.array(checked).T
            right.plot(x, y, "o-", color=colour, ms=3, lw=1, label=phase)
    grid = meta.validation and meta.validation.grid_best_speedup
    if grid:
        right.axhline(grid, color="grey", ls="--", lw=1, label=f"best static tree ({grid:.3f})")
    left.set(xlabel="environment steps", ylabel=f"mean reward per step ({meta.reward})",
             title="training reward")
    right.set(xlabel="environment steps", ylabel="validation speedup (simulated, mean)",
              title="deployed policy on validation prompts")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    profile = meta.profile or TrainedOn()
    tag = " (ANALYTIC profile)" if profile.kind == "analytic" else ""
    fig.suptitle(f"{name}: {meta.algo} ({meta.preset}, seed {meta.seed}) on {profile.name}{tag}", fontsize=10)
    return _save(plt, fig, path)


def _run_title(report: ValidationReport) -> str:
    return (f"{report.profile.name} ({report.device}): {report.n_prompts} {report.prompts} prompts, "
            f"{report.max_new_tokens} new tokens")


def plot_sim_vs_real(report: ValidationReport, out_dir: Path, *, force: bool = False) -> Path:
    """Simulated against real median speedup per method, with the diagonal and IQR bars."""
    path = Path(out_dir) / "sim-vs-real.png"
    plt = _pyplot(path, force)
    rows = report.rows
    fig, ax = plt.subplots(figsize=(6.4, 5.6))
    real = np.array([r.speedup_real for r in rows])
    sim = np.array([r.speedup_sim for r in rows])
    # Bars: the IQR over prompts (greedy), or the 95 % CI of the mean over seeds (T > 0)
    low_high = [r.speedup_real_ci95 if r.statistic == "mean"
                else (r.speedup_real_q25, r.speedup_real_q75) for r in rows]
    iqr = np.array([[r.speedup_real - lo, hi - r.speedup_real] for r, (lo, hi) in zip(rows, low_high)]).T
    lo, hi = min(real.min(), sim.min()) * 0.95, max(real.max(), sim.max()) * 1.05
    ax.fill_between([lo, hi], [lo * 0.97, hi * 0.97], [lo * 1.03, hi * 1.03], color="grey", alpha=0.15,
                    label="±3 %")
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8, label="sim = real")
    ax.errorbar(real, sim, xerr=np.maximum(iqr, 0), fmt="o", ms=5, capsize=2, lw=0.6)
    for r, x, y in zip(rows, real, sim):
        ax.annotate(r.method, (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set(xlim=(lo, hi), ylim=(lo, hi),
           xlabel=("real speedup over plain sampling (mean; bars: 95 % CI)" if report.temperature else
                   "real speedup over greedy (median; bars: IQR over prompts)"),
           ylabel=("simulated expected speedup (mean, same prompts and seeds)" if report.temperature else
                   "simulated speedup (median, same prompts)"))
    rank = report.rank_agreement
    ax.set_title(f"{_run_title(report)}\nmean |error| {report.mean_abs_rel_error:.1%}, max "
                 f"{report.max_abs_rel_error:.1%}, Spearman {'n/a' if rank is None else f'{rank:.2f}'}",
                 fontsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    return _save(plt, fig, path)


def plot_time_breakdown(report: ValidationReport, out_dir: Path, *, force: bool = False) -> Path:
    """LTD Figure 2 (right): where each method's time goes, as shares of its total."""
    path = Path(out_dir) / "time-breakdown.png"
    plt = _pyplot(path, force)
    rows = sorted(report.rows, key=lambda r: -r.speedup_real)
    parts = ("prefill", "draft", "verify", "policy", "bookkeeping")
    colours = plt.cm.Set2(np.arange(len(parts)))
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(rows) + 1.8))
    left = np.zeros(len(rows))
    for colour, part in zip(colours, parts):
        share = np.array([r.time_shares.get(part, 0.0) for r in rows])
        ax.barh(np.arange(len(rows)), share, left=left, color=colour, label=part)
        left += share
    ax.set_yticks(np.arange(len(rows)), [f"{r.method} ({r.speedup_real:.2f}x)" for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set(xlabel="share of the method's wall time (mean over prompts)", xlim=(0, 1))
    ax.legend(fontsize=7, ncol=len(parts), loc="lower center", bbox_to_anchor=(0.5, 1.0))
    ax.set_title(_run_title(report), fontsize=8, pad=22)
    return _save(plt, fig, path)


def plot_action_map(report: ValidationReport, method: str, out_dir: Path, *, force: bool = False) -> Path:
    """LTD Figure 6: how often a method drafted depth D and verified V tokens, one panel per
    accepted length (what the target then took)."""
    row = next((r for r in report.rows if r.method == method), None)
    if row is None:
        raise KeyError(method)
    path = action_map_file(out_dir, method)
    plt = _pyplot(path, force)
    actions = np.array(row.actions, dtype=int).reshape(-1, 3)
    depths = np.arange(1, max(int(actions[:, 0].max()), 2) + 1)
    sizes = np.unique(actions[:, 1])
    groups = [(0, 0, "0"), (1, 1, "1"), (2, 2, "2"), (3, 3, "3"), (4, 10 ** 6, "≥4")]
    fig, axes = plt.subplots(1, len(groups), figsize=(3.1 * len(groups), 3.6), sharey=True)
    panels = []
    for lo, hi, _ in groups:
        mine = actions[(actions[:, 2] >= lo) & (actions[:, 2] <= hi)]
        grid = np.zeros((len(sizes), len(depths)))
        np.add.at(grid, (np.searchsorted(sizes, mine[:, 1]), mine[:, 0] - 1), 1)
        panels.append((grid, len(mine)))
    counts_max = max(1, *(int(grid.max()) for grid, _ in panels))
    for ax, (grid, total), (_, _, label) in zip(axes, panels, groups):
        image = ax.imshow(np.where(grid > 0, grid, np.nan), origin="lower", aspect="auto", cmap="viridis",
                          vmin=1, vmax=counts_max)
        ax.set_xticks(range(len(depths)), [str(d) for d in depths], fontsize=6)
        ax.set_yticks(range(len(sizes)), [str(v) for v in sizes], fontsize=6)
        ax.set(xlabel="draft depth D", title=f"accepted {label}: {total} cycles")
    axes[0].set_ylabel("verified tokens V")
    fig.suptitle(f"{method}: actions on real runs; {_run_title(report)}", fontsize=8)
    fig.subplots_adjust(top=0.82, bottom=0.16, left=0.05, right=0.92, wspace=0.12)
    fig.colorbar(image, cax=fig.add_axes([0.935, 0.16, 0.01, 0.66]), label="cycles")
    return _save(plt, fig, path, tight=False)


def plot_validation(report: ValidationReport, out_dir: Path, method: str | None = None, *,
                    force: bool = False) -> list[Path]:
    """Every figure of a ``validate --real`` report (``validation_files``), all or none: drawn into a
    staging folder before any is renamed into place."""
    out_dir = Path(out_dir)
    paths = validation_files(report, out_dir, method)
    refuse_existing(paths, force)
    out_dir.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(dir=out_dir, prefix=".figures.", suffix=".tmp"))
    try:
        # the staging folder is new and empty: nothing in it to refuse
        drawn = [plot_sim_vs_real(report, stage, force=True), plot_time_breakdown(report, stage, force=True)]
        drawn += [plot_action_map(report, m, stage, force=True) for m in _mapped_methods(report, method)]
        for staged, path in zip(drawn, paths):
            os.replace(staged, path)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return paths


def plot_load(s: dict, path: Path) -> Path:
    """``simspec load``'s goodput, TPOT (p90 dashed) and throughput against the rate, a line per method,
    where speculation stops paying shaded; with a surface, each tree size's over plain decoding's."""
    plt = _pyplot()
    verdicts = sorted((v for v in s["verdicts"] if "rate" in v["stream"]), key=lambda v: v["stream"]["rate"])
    rates = np.array([v["stream"]["rate"] for v in verdicts])
    methods = list(dict.fromkeys(r["method"] for r in s["rows"]))
    panels = 4 if s.get("surface") else 3
    fig, axes = plt.subplots(1, panels, figsize=(4.6 * panels, 4.4))
    target_ms = 1e3 * s["tpot_target_s"]
    for i, method in enumerate(methods):
        rows = [next(r for r in s["rows"] if r["method"] == method and r["stream"] == v["stream"]) for v in verdicts]
        style = {"color": f"C{i % 10}", "marker": "o", "ms": 4, "label": method}
        axes[0].plot(rates, [r["goodput_requests_per_s"] for r in rows], **style)
        axes[1].plot(rates, [1e3 * r["tpot_p50_s"] for r in rows], **style)
        axes[1].plot(rates, [1e3 * r["tpot_p90_s"] for r in rows], ls="--", color=style["color"])
        axes[2].plot(rates, [r["throughput_tokens_per_s"] for r in rows], **style)
    axes[1].axhline(target_ms, color="grey", lw=0.8)
    labels = (f"goodput (requests/s with TPOT <= {target_ms:g} ms)", "time per output token (ms): p50, p90 dashed",
              "throughput (output tokens/s)")
    pays = [v["speculation_pays"] for v in verdicts]
    stops = [k for k in range(1, len(pays)) if pays[k - 1] and not pays[k]]
    for ax, label in zip(axes[:3], labels):
        ax.set(xlabel="request rate (requests/s)", ylabel=label)
        if rates.max() > 10 * rates.min():
            ax.set_xscale("log")
        ax.set_xticks(rates, [f"{r:g}" for r in rates])
        ax.minorticks_off()
        for k in stops:
            ax.axvspan(rates[k - 1], rates[k], color="grey", alpha=0.2, lw=0)
    if stops:
        axes[0].text(0.02, 0.98, "shaded: speculation stops paying", transform=axes[0].transAxes, va="top",
                     fontsize=8)
    if panels == 4:
        _load_surface(axes[3], s, verdicts)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=min(len(methods), 3), fontsize=7,
               frameon=False)
    kind = "ANALYTIC device model, " if s["kind"] == "analytic" else ""
    fig.suptitle(f"{s['target']} + {s['draft']} on {s['device']} ({kind}max batch {s['max_batch']}, "
                 f"{s['split']} prompts, {verdicts[0]['stream']['kind']} arrivals)", fontsize=9)
    fig.tight_layout(rect=(0, 0.05 + 0.035 * ((len(methods) + 2) // 3), 1, 0.95))
    return _save(plt, fig, path, tight=False)


def _load_surface(ax, s: dict, verdicts: list[dict]) -> None:
    """Throughput of each static tree size over plain decoding's, per rate (rows) and V (columns)."""
    sizes = sorted({row["size"] for row in s["surface"]})
    plain = {str(r["stream"]): r["throughput_tokens_per_s"] for r in s["rows"] if r["method"] == "plain"}
    grid = np.array([[next(row["throughput_tokens_per_s"] for row in s["surface"]
                           if row["size"] == v and row["stream"] == verdict["stream"])
                      / plain[str(verdict["stream"])] for v in sizes] for verdict in verdicts])
    spread = max(float(np.abs(grid - 1).max()), 0.01)  # white at parity, red where a tree loses
    image = ax.imshow(grid, origin="lower", aspect="auto", cmap="RdBu", vmin=1 - spread, vmax=1 + spread)
    for (i, j), value in np.ndenumerate(grid):
        ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7)
    ax.figure.colorbar(image, ax=ax).set_label("throughput / plain decoding's")
    ax.set_xticks(range(len(sizes)), [str(v) for v in sizes])
    ax.set_yticks(range(len(verdicts)), [f"{v['stream']['rate']:g}" for v in verdicts])
    ax.set(xlabel="static tree size V (best depth on the train split)", ylabel="request rate (requests/s)")


def plot_headroom(s: dict, path: Path) -> Path:
    """``simspec headroom``: per batch size, every row's median speedup with its IQR, best first."""
    plt = _pyplot()
    batches = s["batches"]
    colours = {"oracle": "C3", "bound": "C1", "static": "C2", "rule": "C0", "learned": "C4"}
    height = 0.9 + 0.28 * max(len(b["rows"]) for b in batches)
    fig, axes = plt.subplots(1, len(batches), figsize=(8 * len(batches), height + 0.6), squeeze=False)
    for ax, batch in zip(axes[0], batches):
        rows = batch["rows"][::-1]
        y = np.arange(len(rows))
        medians = np.array([r["speedup"] for r in rows])
        errors = np.array([[r["speedup"] - r["q25"] for r in rows], [r["q75"] - r["speedup"] for r in rows]])
        ax.barh(y, medians, xerr=errors, color=[colours[r["kind"]] for r in rows], alpha=0.8, capsize=2)
        ax.set_yticks(y, [f"{r['method']} ({r['share_of_oracle']:.0%})" for r in rows], fontsize=7)
        static = next(r for r in rows if r["kind"] == "static")
        ax.axvline(static["speedup"], color="C2", ls="--", lw=1)
        ax.axvline(1.0, color="grey", lw=0.8)
        v = batch["verdict"]
        ax.set(xlabel="speedup over plain decoding (median over prompts; bars: IQR)",
               title=f"batch {batch['batch_size']}: at most {v['over_best_static']:+.1%} over the best static tree",
               xlim=(min(0.9, medians.min() * 0.95), None))
        ax.title.set_fontsize(9)
    kind = "ANALYTIC device model, " if s["kind"] == "analytic" else ""
    fig.suptitle(f"headroom for an adaptive policy (in brackets: share of the oracle)\n{s['target']} + {s['draft']} "
                 f"on {s['device']} ({kind}T = {s['temperature']:g}, {s['heldout_prompts']} held-out prompts)",
                 fontsize=9)
    return _save(plt, fig, path)
