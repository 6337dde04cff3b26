"""The ``validate --real`` report: real and simulated speedups side by side, paired tests, rank agreement,
drift. ``report.json`` holds everything the figures need (``simspec plot validation`` redraws them)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np

from simspec.errors import SimspecError
from simspec.schema import Artifact, Record
from simspec.stats import gain, mean_ci, paired_p, spearman

REPORT_SCHEMA, REPORT_VERSION = "simspec-validation", 1


@dataclass(frozen=True, kw_only=True)
class ReportProfile(Record):
    """``profile``: the profile that predicted the runs."""

    name: str
    path: str | None = None
    hash: str | None = None
    device: str | None = None
    device_model: str | None = None
    threads: int | None = None
    created: str | None = None
    in_situ: dict | None = None  # the base profile, when this one is an in-situ refit
    refit: str | None = None  # "this run": refitted by --recalibrate right before the runs


@dataclass(frozen=True, kw_only=True)
class Fidelity(Record):
    """How far the simulated speedups are from the real ones, over the methods."""

    mean_abs_rel_error: float
    max_abs_rel_error: float
    rank_agreement: float | None = field(default=None, metadata={"what": "a number or null"})


@dataclass(frozen=True, kw_only=True)
class CoTimedRefit(Fidelity):
    """``co_timed_refit``: the runs re-predicted by a refit timed between them (rows: method,
    speedup_real, speedup_sim, rel_error and their over-the-set twins)."""

    refit: dict
    rows: list
    over_the_set: Fidelity | None = None


@dataclass(frozen=True, kw_only=True)
class DriftCorrected(Fidelity):
    """``drift_corrected``: the errors once each curve is rescaled by the run's own drift."""

    over_the_set: Fidelity | None = None


@dataclass(frozen=True, kw_only=True)
class Drift(Record):
    """``drift``: live latency over the profile's curve per operation, and advice when it is large."""

    ratios: dict
    advice: str | None = None


@dataclass(frozen=True, kw_only=True)
class ReportRow(Record):
    """One method's row: real and simulated speedups, their error, acceptance, time shares, the
    paired tests against the references, losslessness, and every (depth, size, accepted) action."""

    method: str
    family: str
    speedup_real: float
    speedup_real_q25: float
    speedup_real_q75: float
    speedup_sim: float
    rel_error: float
    time_shares: dict  # draft, verify, policy, bookkeeping: shares of the method's live time
    actions: list
    statistic: str | None = None  # "mean" at T > 0 (with speedup_real_ci95), else the median
    speedup_real_ci95: list | None = None
    speedup_sim_drift_corrected: float | None = None
    rel_error_drift_corrected: float | None = None
    speedup_real_set: float | None = None
    speedup_sim_set: float | None = None
    rel_error_set: float | None = None
    speedup_sim_set_interval: list | None = None  # 5-95 %: the profile's spread and the run's drift
    in_interval: bool | None = None
    tau: float | None = None
    tau_sim: float | None = None
    tau_real: float | None = None
    draft_calls: float | None = None
    decision_seconds_per_cycle: float | None = None
    gain_vs_eagle3: float | None = None
    p_vs_eagle3: float | None = None
    gain_vs_grid: float | None = None
    p_vs_grid: float | None = None
    exact_match: bool | None = None
    lossless: bool | None = None
    pit_p: float | None = None  # T > 0: the PIT's KS p-value
    divergences: list = field(default_factory=list)

    def verdict(self, no: str = "NO") -> str:
        """Its lossless verdict (``lossless_label``)."""
        return lossless_label(self.exact_match, self.lossless, self.pit_p, no)


@dataclass(frozen=True, kw_only=True)
class ValidationReport(Artifact):
    """``report.json`` of a ``validate --real`` run."""

    SCHEMA: ClassVar[str] = REPORT_SCHEMA
    VERSIONS: ClassVar[tuple[int, ...]] = (REPORT_VERSION,)
    profile: ReportProfile
    device: str
    prompts: str
    n_prompts: int
    max_new_tokens: int
    mean_abs_rel_error: float
    max_abs_rel_error: float
    rank_agreement: float | None = field(default=None, metadata={"what": "a number or null"})
    rows: list[ReportRow] = field(metadata={"what": "a list of method rows"})
    split: str | None = None
    repeats: int = 1
    runtime: str = "eager"  # the engine's (engine.runtime); reports from before it ran eagerly
    compile_s: float = 0.0  # compiling the target's forwards, before the timed runs
    target: str | None = None
    draft: str | None = None
    simspec_version: str | None = None
    created: str | None = None
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    seconds: float | None = None
    drift: Drift | None = None
    drift_corrected: DriftCorrected | None = None
    staleness: dict | None = None  # the profile's age and machine, plain decoding's drift through the runs
    intervals: dict | None = None  # coverage of the predicted speedups' intervals
    over_the_set: Fidelity | None = None
    co_timed_refit: CoTimedRefit | None = None
    measurement_noise: dict | None = None
    mean_abs_tau_rel_error: float | None = None
    rank_inversions: list = field(default_factory=list)
    decision_seconds_charged: dict = field(default_factory=dict)
    residuals: dict | None = None
    near_tie_cut_traces: int | None = None
    warnings: list = field(default_factory=list)
REFERENCES = ("eagle3", "grid")  # the families the paired tests compare against


def lossless_label(exact_match: bool | None, lossless: bool | None, pit_p: float | None, no: str = "NO") -> str:
    """yes (equal to greedy), near-tie (split only at float-order ties) or NO (a bug); at T > 0 (``pit_p``
    given) yes / NO by the KS test of the outputs' PIT."""
    if pit_p is not None:  # T > 0: a statistical verdict
        return f"{'yes' if lossless else no} (PIT p {pit_p:.2g})"
    return "yes" if exact_match else ("near-tie" if lossless else no)


def _finite(value):
    return None if isinstance(value, float) and not math.isfinite(value) else value


def per_prompt(values: np.ndarray, prompts: int) -> np.ndarray:
    """Per-(pass, prompt) values, pass-major, folded to one mean per prompt."""
    return np.asarray(values, dtype=float).reshape(-1, prompts).mean(axis=0)


def method_row(runs, simulated, corrected, references: dict[str, np.ndarray]) -> dict:
    """One method's row: real, simulated (also drift-corrected), paired tests. Greedy: medians over
    prompts; at T > 0 the speedup is random: means over every (prompt, seed), a 95 % CI over prompts."""
    real = runs.speedup
    sim, sim_corrected = (per_prompt(x.speedup, len(real)) for x in (simulated, corrected))
    centre = np.mean if runs.sampled else np.median
    q25, q75 = np.percentile(real, [25, 75])
    speedup_real, speedup_sim, speedup_corrected = (float(centre(x)) for x in (real, sim, sim_corrected))
    per_prompt_error = (sim - real) / real
    tau, tau_sim = (float(np.sum(x.tokens) / max(np.sum(x.cycles), 1)) for x in (runs, simulated))
    row = {
        "method": runs.name, "family": runs.family, "statistic": "mean" if runs.sampled else "median",
        "speedup_real": speedup_real, "speedup_real_q25": float(q25), "speedup_real_q75": float(q75),
        "speedup_real_mean": float(np.mean(real)), "speedup_real_ci95": list(mean_ci(real)),
        "repeat_medians": [float(np.median(r)) for r in runs.by_repeat],
        "speedup_sim": speedup_sim, "rel_error": (speedup_sim - speedup_real) / speedup_real,
        "per_prompt_abs_rel_error_median": float(np.median(np.abs(per_prompt_error))),
        # Over the whole set (time per token summed over every prompt and pass): the papers' speedup
        "speedup_real_set": runs.set_speedup, "speedup_sim_set": simulated.set_speedup,
        "rel_error_set": (simulated.set_speedup - runs.set_speedup) / runs.set_speedup,
        "repeat_set": runs.set_by_repeat,
        "speedup_sim_drift_corrected": speedup_corrected,
        "rel_error_drift_corrected": (speedup_corrected - speedup_real) / speedup_real,
        "speedup_sim_set_drift_corrected": corrected.set_speedup,
        "rel_error_set_drift_corrected": (corrected.set_speedup - runs.set_speedup) / runs.set_speedup,
        "tau": tau, "tau_real": tau, "tau_sim": tau_sim, "tau_rel_error": (tau_sim - tau) / tau,
        "cycles": float(np.mean(runs.cycles)), "cycles_sim": float(np.mean(simulated.cycles)),
        "decision_seconds_per_cycle": float(np.sum(runs.policy_seconds) / max(np.sum(runs.cycles), 1)),
        "draft_calls": float(np.mean(runs.draft_calls)), "draft_calls_sim": float(np.mean(simulated.draft_calls)),
        "time_shares": {k: float(np.mean([s[k] for s in runs.shares])) for k in runs.shares[0]},
        "lossless": runs.lossless,
        "exact_match": not runs.divergences and not runs.sampled,
        "pit_p": runs.pit_p, "pit_tokens": len(runs.pit),
        "divergences": runs.divergences,
        "per_prompt": {"speedup_real": real.tolist(), "speedup_sim": sim.tolist(),
                       "speedup_sim_drift_corrected": sim_corrected.tolist()},
        "actions": runs.actions,
    }
    if runs.sampled:  # every (pass, prompt): one seed, shared by all methods
        row["per_seed"] = {"speedup_real": runs.paired.tolist(), "speedup_sim": np.asarray(simulated.speedup).tolist()}
    for family, reference in references.items():
        same = runs.family == family
        row[f"p_vs_{family}"] = None if same else paired_p(runs.paired, reference)
        row[f"gain_vs_{family}"] = None if same else gain(runs.paired, reference)
    return row


def rank_inversions(rows: list[dict]) -> list[dict]:
    """Pairs the simulator orders differently from the real runs, with the real runs' paired p-value."""
    out = []
    for a, b in itertools.combinations(rows, 2):
        real = a["speedup_real"] - b["speedup_real"]
        sim = a["speedup_sim"] - b["speedup_sim"]
        if real * sim < 0:
            out.append({"a": a["method"], "b": b["method"], "real_difference": real, "sim_difference": sim,
                        "p_real": paired_p(a["per_prompt"]["speedup_real"], b["per_prompt"]["speedup_real"])})
    return out


def build_report(meta: dict, runs: list, simulated: dict, drift, corrected: dict) -> dict:
    """``report.json`` from MethodRuns (method order), their replays on the same prompts (by method), the
    run's DriftMeter and the replays with the profile's curves rescaled by that drift."""
    first = {r.family: r for r in reversed(runs)}
    references = {family: first[family].paired for family in REFERENCES if family in first}
    rows = [method_row(r, simulated[r.name], corrected[r.name], references) for r in runs]
    drifted = drift.drifted()
    noise = measurement_noise(rows)
    return {
        "schema": REPORT_SCHEMA, "schema_version": REPORT_VERSION, **meta,
        "rows": rows,
        **error_summary(rows),
        "mean_abs_tau_rel_error": float(np.mean(np.abs([r["tau_rel_error"] for r in rows]))),
        "rank_inversions": rank_inversions(rows),
        "over_the_set": error_summary(rows, "_set"),
        **({"measurement_noise": noise} if noise else {}),
        "drift_corrected": {**error_summary(rows, "_drift_corrected", real=""),
                            "over_the_set": error_summary(rows, "_set_drift_corrected", real="_set")},
        "drift": {"ratios": drift.ratios(), "drifted": drifted, "tolerance": 0.10,
                  "advice": (f"live latencies differ from the profile's by more than 10 % ({', '.join(drifted)}): "
                             "refit the profile in situ (`simspec recalibrate --profile PROFILE`) right before "
                             "the runs it predicts, and validate with the refitted one") if drifted
                  else None},
    }


def error_summary(rows: list[dict], statistic: str = "", real: str | None = None) -> dict:
    """Mean / max |relative error| and Spearman of rows' ``rel_error{statistic}`` and
    ``speedup_sim{statistic}`` against ``speedup_real{real}`` (``real`` defaults to ``statistic``)."""
    errors = np.abs([r[f"rel_error{statistic}"] for r in rows])
    real = statistic if real is None else real
    return {"mean_abs_rel_error": float(errors.mean()), "max_abs_rel_error": float(errors.max()),
            "rank_agreement": _finite(spearman([r[f"speedup_sim{statistic}"] for r in rows],
                                                [r[f"speedup_real{real}"] for r in rows]))}


def measurement_noise(rows: list[dict], draws: int = 20_000, seed: int = 0) -> dict | None:
    """The pass-to-pass standard error of each method's median speedup, and the mean and max |error| an
    exact simulator would show against runs this noisy (Monte Carlo): below it, an error is noise, not
    the model. None with fewer than 2 passes."""
    medians = [r["repeat_medians"] for r in rows]
    if any(len(m) < 2 for m in medians):
        return None

    def floor(per_pass: list) -> tuple[np.ndarray, np.ndarray]:
        se = np.array([np.std(m, ddof=1) / np.sqrt(len(m)) / np.mean(m) for m in per_pass])
        return se, np.abs(np.random.default_rng(seed).normal(size=(draws, len(se))) * se)

    se, errors = floor(medians)
    out = {"se": {r["method"]: float(x) for r, x in zip(rows, se)}, "se_median": float(np.median(se)),
           "exact_model_mean_abs_rel_error": float(errors.mean()),
           "exact_model_max_abs_rel_error": float(errors.max(axis=1).mean())}
    if all(len(r.get("repeat_set") or ()) >= 2 for r in rows):
        set_se, set_errors = floor([r["repeat_set"] for r in rows])
        out["over_the_set"] = {"se_median": float(np.median(set_se)),
                               "exact_model_mean_abs_rel_error": float(set_errors.mean()),
                               "exact_model_max_abs_rel_error": float(set_errors.max(axis=1).mean())}
    return out


def read_report(path) -> ValidationReport:
    """A ``validate --real`` report (its folder or ``report.json``); one clear error otherwise."""
    path = Path(path)
    file = path / "report.json" if path.is_dir() else path
    if path.is_dir() and not file.exists() and (path / "report.json.gz").exists():  # as research/runs keeps a run
        file = path / "report.json.gz"
    fix = (f"rerun `simspec validate --real --profile PROFILE --out {file.parent} --force`"
           if file.name in ("report.json", "report.json.gz")  # never advice to write over a file of another name
           else "pass a run folder that `simspec validate --real` wrote, or its report.json")
    report = ValidationReport.read(file, "", f"no validation report at {file}: run `simspec validate --real`", fix)
    if not report.rows:
        raise SimspecError(f"{file}: field 'rows' is empty (a report has a row per method): {fix}")
    for i, row in enumerate(report.rows):
        if not row.actions or not all(isinstance(a, list) and len(a) == 3 and all(type(x) is int and x >= 0 for x in a)
                                      for a in row.actions):
            raise SimspecError(f"{file}: field 'rows[{i}].actions' must be a non-empty list of [depth, size, "
                               f"accepted] integer triples: {fix}")
    return report


def summary_line(report: ValidationReport, run_path: str) -> dict:
    """The ``--json`` line."""
    keep = ("method", "speedup_real", "speedup_real_ci95", "speedup_sim", "rel_error", "speedup_real_set",
            "speedup_sim_set", "rel_error_set", "speedup_sim_set_interval", "in_interval", "tau", "tau_real",
            "tau_sim", "lossless", "pit_p", "p_vs_eagle3")
    co = report.co_timed_refit
    return {"run": run_path, "temperature": report.temperature,
            "rows": [{k: getattr(r, k) for k in keep} for r in report.rows],
            "mean_abs_rel_error": report.mean_abs_rel_error, "rank_agreement": report.rank_agreement,
            "fidelity": fidelity_rows(report),
            "over_the_set": report.over_the_set and report.over_the_set.to_json(),
            "intervals": report.intervals, "staleness": report.staleness,
            **({"co_timed_refit": {"mean_abs_rel_error": co.mean_abs_rel_error, "max_abs_rel_error":
                                   co.max_abs_rel_error, "rank_agreement": co.rank_agreement}} if co else {})}


def fidelity_rows(report: ValidationReport) -> list[dict]:
    """Every prediction a report holds (its profile or upfront refit, and any co-timed refit), each over
    the set and as a median over prompts. The first row is the headline: the co-timed refit (timed over
    the same minutes as the runs) over the set (which does not jump between fast and slow prompts)."""
    noise = report.measurement_noise or {}
    up = "upfront refit" if report.profile.refit == "this run" else "profile"
    rows = []

    def add(prediction: str, statistic: str, block: Fidelity | ValidationReport | None, floor: dict | None) -> None:
        if block:
            rows.append({"prediction": prediction, "statistic": statistic, "mean": block.mean_abs_rel_error,
                         "max": block.max_abs_rel_error, "spearman": block.rank_agreement,
                         "noise_mean": (floor or {}).get("exact_model_mean_abs_rel_error"),
                         "noise_max": (floor or {}).get("exact_model_max_abs_rel_error")})

    co = report.co_timed_refit
    add("co-timed refit", "over the set", co and co.over_the_set, noise.get("over_the_set"))
    add(up, "over the set", report.over_the_set, noise.get("over_the_set"))
    add("co-timed refit", "median over prompts", co, noise)
    add(up, "median over prompts", report, noise)
    return rows
