"""``simspec validate --real``: one request in, one ``real/<run>/`` folder out: the scored prompts'
trees recorded, every method replayed on them (the prediction) and run on the real engine with
plain decoding, interleaved (what they deliver, and whether outputs are lossless), the live
latencies checked against the profile, and the report and figures written.

At T > 0 pass k samples prompt i with seed ``seed + k * prompts + i``, for plain sampling, every
method and the recorded traces, so methods pair by seed; speedups are means over seeds, and the
lossless verdict is a KS test of the outputs' randomised PIT under the target's distribution."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from simspec import __version__, flags
from simspec.errors import SimspecError
from simspec.flags import opt
from simspec.measure import Bar
from simspec.policies.registry import baselines_help, default_baselines
from simspec.report.validation import ValidationReport
from simspec.sim.charge import DecisionCharge
from simspec.sim.evaluate import check_names, check_split, methods_flag
from simspec.sim.profile import Profile, load_live_profile


@dataclass(frozen=True, kw_only=True)
class ValidateRequest:
    """``simspec validate``: ``--real`` runs it (``validate_real``), ``--simulated`` replays it (``simulated()``)."""

    profile: str = flags.profile()
    baselines: tuple[str, ...] = opt(factory=default_baselines, help=baselines_help, parse=methods_flag)
    drafters: tuple[str, ...] = opt((), "--simulated with the select baseline: comma-separated profiles of other "
                                    "drafters of the same target, their traces recorded on the same prompts.",
                                    parse=flags.names)
    policies: tuple[str, ...] = flags.policies()
    split: str = flags.split()
    max_new_tokens: int | None = flags.max_new_tokens(None, min=2)
    prompts: str = flags.prompts()
    n_prompts: int = flags.n_prompts(40)
    repeats: int = flags.repeats(1)
    recalibrate: bool = flags.recalibrate()
    recalibrate_prompts: int = flags.recalibrate_prompts()
    refit_ladder: str = flags.refit_ladder()
    allow_other_device: bool = flags.allow_other_device()
    temperature: float | None = flags.temperature(None)
    seed: int = flags.seed()  # T > 0: pass k, prompt i sample with seed + k * n_prompts + i
    batch_size: int = flags.batch_size()  # --real above 1: measure/validate_batch.py
    runtime: str = flags.runtime()
    out: str | None = flags.out()
    force: bool = flags.force()

    def tokens(self) -> int:
        """--real's new tokens per prompt."""
        return flags.REAL_TOKENS if self.max_new_tokens is None else self.max_new_tokens

    def simulated(self):
        """The replay of ``validate --simulated`` (numpy only); a flag only --real reads is refused, not ignored."""
        from simspec.sim.run import SimulatedRequest

        shared = {f.name for f in fields(SimulatedRequest)}
        ignored = flags.given(self, {f.name for f in fields(self)} - shared)
        if ignored:
            batches = "; batches in the simulator: simspec headroom --batch-sizes, simspec load" \
                if "--batch-size" in ignored else ""
            raise SimspecError(f"{', '.join(ignored)}: read by validate --real only (--simulated replays the "
                               f"profile's recorded traces){batches}")
        return SimulatedRequest(**{name: getattr(self, name) for name in shared})

    def sampling(self, profile: Profile):
        """How the run decodes: the profile's traces' temperature and top-p, this request's seed."""
        from simspec.engine.sampling import Sampling

        if profile.temperature == 0:
            return Sampling()
        return Sampling(profile.temperature, float(profile.traces().meta.top_p), self.seed)

    def out_dir(self) -> Path:
        return Path(self.out or f"real/validate-{Path(self.profile).name}-{Path(self.prompts).stem}")

    def check(self) -> tuple[Profile, list]:
        """Every flag, the output folder, the profile, its traces, the policies and the prompts, before any load."""
        from simspec.cache import check_out
        from simspec.data import load_prompts
        from simspec.engine.runtime import check_runtime
        from simspec.measure.insitu import check_device, check_refit_flags, ladder_points
        from simspec.policies.artifact import read_policy_meta

        check_split(self.split)
        if "select" in self.baselines:
            raise SimspecError("the 'select' baseline (seed 003's draft selection) runs in validate --simulated only: "
                               "the real engine decodes with one drafter per run")
        check_names(list(self.baselines), prompt_level=False)
        if not self.baselines and not self.policies:
            raise SimspecError("nothing to validate: name --baselines and/or --policies")
        check_runtime(self.runtime)
        if self.runtime == "compiled" and self.batch_size > 1:
            raise SimspecError("validate --real --runtime compiled decodes at batch 1 (calibrate measures compiled "
                               "curves at batch 1 only): use --batch-size 1, or --runtime eager for batches")
        check_out(self.out_dir(), self.force)
        profile = load_live_profile(self.profile, "validate --real")
        profile.require_temperature(self.temperature)
        if profile.engine_runtime != self.runtime:
            raise SimspecError(f"profile {self.profile} was measured under the {profile.engine_runtime} runtime and "
                               f"this run decodes under {self.runtime}: pass --runtime {profile.engine_runtime}, or "
                               f"calibrate a profile with --runtime {self.runtime}")
        if self.batch_size > 1:
            profile.cost.at_batch(self.batch_size)  # one line if the profile has no curves at that size
        ladder_points(self.refit_ladder)
        check_refit_flags(self)
        if self.recalibrate and self.split != "heldout":
            raise SimspecError("--recalibrate refits on the prompt set's train split: validate on --split heldout")
        profile.traces()  # read and checked now (kept for the run): corrupt traces fail before any model loads
        width = profile.meta.traces.width
        for path in self.policies:
            _, meta = read_policy_meta(path)
            if meta.policy.width != width:
                raise SimspecError(f"policy {path} drafts at width {meta.policy.width}, the profile's traces "
                                   f"at width {width}: use a policy trained on this profile")
        chosen = load_prompts(self.prompts, split=None if self.split == "all" else self.split, n=self.n_prompts)
        if not chosen:
            raise SimspecError(f"no {self.split} prompts in {self.prompts}: use another --prompts or --split all")
        self.refit_prompts()  # --recalibrate: refused now if the set has no train prompts
        check_device(profile, self.allow_other_device, refit=self.recalibrate)  # last: every other fault is the input's
        return profile, chosen

    def refit_prompts(self) -> list:
        """The train-split prompts ``--recalibrate`` refits on (never the scored ones)."""
        from simspec.data import DataError, load_prompts

        if not self.recalibrate:
            return []
        try:
            return load_prompts(self.prompts, split="train", n=self.recalibrate_prompts)
        except DataError:
            raise SimspecError(f"--recalibrate needs train-split prompts of {self.prompts} to refit on, and it has "
                               "none: recalibrate on another set with `simspec recalibrate`, or drop --recalibrate"
                               ) from None


def _file_hash(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.is_file() else None


def validate_real(request: ValidateRequest, bar: Bar, status: Callable[[str], object],
                  checked: tuple[Profile, list] | None = None) -> tuple[ValidationReport, Path]:
    """Runs the whole validation; returns the report and its folder. ``status(text)``: a context
    manager shown during steps without a progress count; ``checked``: ``request.check()``'s result."""
    from simspec.measure.insitu import CoTimedRefit
    from simspec.measure.interleave import DriftMeter, rescaled_cost, run_methods
    from simspec.measure.residuals import cycle_table, residual_breakdown
    from simspec.measure.staleness import add_intervals, intervals, plain_ratio, replicate_factors, staleness
    from simspec.report.markdown import render_markdown
    from simspec.report.plots import plot_validation
    from simspec.report.validation import build_report
    from simspec.sim.replay import replay

    started = time.perf_counter()
    s = setup_run(request, checked, bar, status)
    traces, recorded = scored_traces(request, s.profile, s.engine, s.chosen, s.ids, bar)
    charge = {m.name: s.charged.get(m.family, DecisionCharge.flat(0.0)) for m in s.methods}

    def simulate(cost):
        return {m.name: replay(traces, cost, m, s.tokens, charge[m.name], seed=s.sampling.seed) for m in s.methods}

    simulated = simulate(s.profile.cost)
    co_timed = CoTimedRefit(s.engine, s.base, s.refit_on, s.tokens, ladder=s.ladder) if s.refit_on else None
    tick = bar("real runs (greedy + every method, interleaved)" + (", refit co-timed" if co_timed else ""),
               len(s.ids) * (len(s.methods) + 1) * request.repeats)
    before = plain_ratio(s.engine, s.ids[0], s.tokens, s.profile.cost, s.width)  # the machine against the profile
    drift = DriftMeter(s.profile.cost, s.methods[0].width)  # every run held against the profile
    runs = run_methods(s.engine, [(p.id, i) for p, i in zip(s.chosen, s.ids)], s.methods, s.tokens, tick,
                       request.repeats, drift, None if co_timed is None else co_timed.step)
    after = plain_ratio(s.engine, s.ids[0], s.tokens, s.profile.cost, s.width)
    meta = _run_meta(request, s, traces, recorded, simulated)
    meta["staleness"] = staleness(s.profile, meta["device_model"], drift.runs, before, after)
    corrected = simulate(rescaled_cost(s.profile.samples, drift.ratios()))
    report = build_report(meta, runs, simulated, drift, corrected)
    add_intervals(report, intervals(s.profile.samples, simulate, simulated, corrected,
                                    replicate_factors(s.profile)))
    report["residuals"] = residual_breakdown(drift.runs, charge)
    profiles, phases = {}, {"scored": drift.runs}
    if co_timed is not None:  # the same prediction from the refit timed alongside the scored runs
        refit_co = co_timed.result()
        profiles = {"profile": s.profile, "profile-cotimed": refitted_profile(request, s, refit_co, "profile-cotimed")}
        report["co_timed_refit"] = co_timed_block(report["rows"], runs, simulate(profiles["profile-cotimed"].cost),
                                                  refit_co.record)
        phases = {"refit": s.refit.timings, "co-timed": refit_co.timings, **phases}
    report["seconds"] = round(time.perf_counter() - started, 1)

    def more(tmp: Path, typed: ValidationReport) -> None:
        np.savez_compressed(tmp / "cycles.npz", **cycle_table(phases))
        plot_validation(typed, tmp, force=True)  # tmp is this run's new folder: no earlier figure to keep

    return write_run(s.out_dir, request.force, report, ValidationReport, render_markdown, profiles, more), s.out_dir


@dataclass
class Setup:
    """A real validation's engine (at B > 1 also its ``rows``), prompts, methods and predicting profile."""

    base: Profile
    profile: Profile
    chosen: list
    refit_on: list  # (id, token ids) of the train prompts refitted on
    engine: object
    rows: object
    ids: list
    sampling: object
    tokens: int
    width: int
    out_dir: Path
    ladder: tuple = ()  # --refit-ladder's (depth, V) points
    refit: object | None = None
    methods: list = field(default_factory=list)
    charged: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def setup_run(request: ValidateRequest, checked, bar: Bar, status: Callable[[str], object]) -> Setup:
    """Loads the engine, refits the profile (``--recalibrate``) and tunes the methods, priced at the batch size."""
    from simspec.engine.speculative import SpeculativeEngine
    from simspec.measure.insitu import check_device, ladder_points, refit_in_situ
    from simspec.measure.insitu_batch import refit_batch
    from simspec.measure.interleave import load_engine
    from simspec.policies.base import tree_capacity
    from simspec.sim.evaluate import GRID_SIZES, method_set, split_traces

    profile, chosen = checked or request.check()
    warning = check_device(profile, request.allow_other_device, refit=request.recalibrate)
    ref, batch, tokens = profile.meta.traces, request.batch_size, request.tokens()
    refit_texts = request.refit_prompts()
    ladder = ladder_points(request.refit_ladder)
    room = tokens + max(ref.depth_max, *(d for d, _ in ladder)) if refit_texts else tokens + ref.depth_max
    sampling = request.sampling(profile)
    engine, all_ids = load_engine(profile, [p.text for p in chosen + refit_texts], room, status, sampling)
    if engine.runtime == "compiled":  # batch 1 only (``check``)
        with status("compiling the target's forwards for every shape the runs meet (once per process)"):
            engine.warm_up([len(i) for i in all_ids], tokens,  # any size a policy may choose
                           range(1, min(tree_capacity(ref.depth_max, ref.width), max(GRID_SIZES)) + 1))
    rows = engine if batch == 1 else SpeculativeEngine(engine.target, engine.drafter, engine.sampling, batch_size=batch)
    refit_on = [(p.id, i) for p, i in zip(refit_texts, all_ids[len(chosen):])]
    s = Setup(profile, profile, chosen, refit_on, engine, rows, all_ids[:len(chosen)], sampling, tokens, ref.width,
              request.out_dir(), ladder)
    if refit_on:  # the profile that predicts: refitted here, now, on the same prompt set's train split
        s.refit = (refit_batch(rows, profile, refit_on, tokens, bar, ladder) if batch > 1
                   else refit_in_situ(engine, profile.cost, profile.samples, ref.width, refit_on, tokens, bar, ladder))
        s.profile = refitted_profile(request, s, s.refit, "profile")
        s.profile._traces = profile.traces()  # the same traces, already read and checked
    with status("tuning baselines on the profile's train split" + (f", priced at batch {batch}" if batch > 1 else "")):
        train = split_traces(s.profile.traces(), "train")
        priced = s.profile if batch == 1 else SimpleNamespace(meta=s.profile.meta, cost=s.profile.cost.at_batch(batch))
        s.methods, s.charged, notes = method_set(list(request.baselines), list(request.policies), priced, train,
                                                 tokens)
    s.notes = [warning, *notes] if warning else notes
    return s


def refitted_profile(request: ValidateRequest, s: Setup, refit, name: str) -> Profile:
    """A refit of the base profile, as it is saved in the run's folder ``name``."""
    from simspec.measure.insitu import refitted_meta
    from simspec.sim.profile import build_profile

    meta = refitted_meta(s.base, request.profile, refit, request.prompts, s.out_dir / name, str(s.engine.target.device))
    return build_profile(s.out_dir / name, meta, refit.samples)


def scored_traces(request: ValidateRequest, profile: Profile, engine, chosen: list, ids: list, bar: Bar):
    """The scored prompts' draft trees, recorded with ``engine``'s sampling at ``profile``'s traces'
    depth and width; at T > 0 one sampled continuation per (pass, prompt), prompt n = pass *
    prompts + prompt drawing from seed + n, as the real runs do (``bench_batch.pass_seeds``)."""
    from simspec.measure.recorder import RecordSpec, TraceRecorder
    from simspec.sim.traces import assemble

    ref, sampling, tokens = profile.meta.traces, engine.sampling, request.tokens()
    passes = 1 if sampling.greedy else request.repeats
    nodes = 64 if sampling.greedy else profile.traces().nodes
    spec = RecordSpec(ref.depth_max, ref.width, tokens, sampling, nodes)
    recorded = TraceRecorder(engine.target, engine.drafter, spec).record_all(ids * passes, bar)
    traces = assemble(recorded, ids * passes, {
        "target": profile.meta.target, "draft": profile.meta.draft, "prompts": request.prompts,
        "prompt_ids": [p.id for p in chosen] * passes, "splits": [p.split for p in chosen] * passes,
        "max_new_tokens": tokens, "depth_max": ref.depth_max, "width": ref.width,
        **({} if sampling.greedy else {"temperature": sampling.temperature, "top_p": sampling.top_p,
                                       "nodes": nodes, "seed": sampling.seed})})
    return traces, recorded


def _run_meta(request: ValidateRequest, s: Setup, traces, recorded: list, simulated: dict) -> dict:
    """The report's description of the run (``ValidationReport``'s header fields), hashed."""
    from simspec.engine.runtime import compiled_mode
    from simspec.machine import device_label, device_model, machine
    from simspec.policies.artifact import read_policy_meta

    policies = []
    for path in request.policies:
        directory, meta = read_policy_meta(path)
        policies.append({"path": str(path), "name": meta.name, "algo": meta.algo, "preset": meta.preset,
                         "seed": meta.seed, "npz_hash": _file_hash(directory / "policy.npz"),
                         "decision_seconds": meta.decision_seconds})
    profile, target = s.profile.meta, s.engine.target
    meta = {
        "simspec_version": __version__, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(str(target.device)), "device_model": device_model(str(target.device)),
        "device": device_label(str(target.device)), "target": profile.target, "draft": profile.draft,
        "profile": {**profile_block(request, s), "device": profile.device, "device_model": profile.device_model,
                    "threads": profile.threads, "in_situ": (profile.in_situ or {}).get("base")},  # None: tight loops
        "policies": policies, "baselines": list(request.baselines), "warnings": s.notes,
        "prompts": request.prompts, "split": request.split, "n_prompts": len(s.chosen),
        "prompt_ids": [p.id for p in s.chosen], "max_new_tokens": s.tokens, "repeats": request.repeats,
        "runtime": s.engine.runtime, "compile_s": round(s.engine.compile_s, 1), "compile_mode": compiled_mode(target),
        **s.sampling.describe(),  # temperature, top_p, seed (temperature 0: nothing is sampled)
        "traces_hash": traces.content_hash(), "near_tie_cut_traces": int(sum(r.near_tie_cut for r in recorded)),
        # per cycle on the scored prompts, as the simulator charged it (each cycle at its own depth)
        "decision_seconds_charged": {name: float(r.decision_seconds.sum() / max(r.cycles.sum(), 1))
                                     for name, r in simulated.items()},
    }
    meta["inputs_hash"] = inputs_hash(meta, "policies", "temperature", "top_p", "seed")
    return meta


def profile_block(request: ValidateRequest, s: Setup) -> dict:
    """The report's ``profile``: the one that predicted, and whether this run refitted it."""
    refit = s.refit
    return {"name": f"{s.base.directory.name}, refitted in this run" if refit else s.base.directory.name,
            "path": str(request.profile), "hash": s.profile.meta.inputs_hash, "created": s.profile.meta.created,
            "refit": "this run" if refit else None,
            "refit_live_over_profile": refit.record["live_over_profile"] if refit else None}


def inputs_hash(report: dict, *keys: str) -> str:
    """The hash of what a run was given: its profile, methods, prompts, tokens, passes and traces."""
    common = ("profile", "baselines", "prompt_ids", "max_new_tokens", "repeats", "traces_hash", "simspec_version")
    hashed = {k: report[k] for k in (*common, *keys)}
    return hashlib.sha256(json.dumps(hashed, sort_keys=True).encode()).hexdigest()[:16]


def write_run(out_dir: Path, force: bool, report: dict, typed_class, render, profiles: dict, more=None):
    """The run folder, whole or not at all: what is stored is what is rendered (the JSON, read back
    through ``typed_class``); ``profiles``: subfolder -> a predicting profile saved there, reusable
    as `validate --simulated --profile RUN/profile`; ``more(tmp, typed)`` writes the rest."""
    from simspec.cache import atomic_directory
    from simspec.sim.profile import save_profile

    stored = json.loads(json.dumps(report, default=_json_default))
    typed = typed_class.check(stored, out_dir / "report.json", "this is a bug in simspec")
    with atomic_directory(out_dir, replace=force) as tmp:
        for name, profile in profiles.items():
            save_profile(profile, tmp / name)  # the one built above, not fitted again
        (tmp / "report.json").write_text(json.dumps(stored, indent=1))
        (tmp / "report.md").write_text(render(typed))
        if more is not None:
            more(tmp, typed)
    return typed


def co_timed_block(rows: list[dict], runs: list, simulated: dict, record: dict) -> dict:
    """The rows re-predicted by the co-timed refit: per method the speedup and its error, and a summary."""
    from simspec.report.validation import error_summary, per_prompt

    out = []
    for row, method in zip(rows, runs):
        prompts = per_prompt(simulated[method.name].speedup, len(method.speedup))
        sim = float(np.mean(prompts) if method.sampled else np.median(prompts))
        whole = simulated[method.name].set_speedup
        out.append({"method": row["method"], "speedup_real": row["speedup_real"], "speedup_sim": sim,
                    "rel_error": (sim - row["speedup_real"]) / row["speedup_real"],
                    "speedup_real_set": row["speedup_real_set"], "speedup_sim_set": whole,
                    "rel_error_set": (whole - row["speedup_real_set"]) / row["speedup_real_set"]})
    return {"rows": out, **error_summary(out), "over_the_set": error_summary(out, "_set"), "refit": record}


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
