"""Profiles: latency measurements (or an analytic model of them) plus the traces they pair with.

``calibration/<name>/profile.json`` holds every latency sample with its operating point, the
cost model's held-out error, what made it, and its traces: a folder relative to the profile
plus their content hash. Traces do not depend on the hardware, so several profiles can share one
trace folder; the hash makes sure it is the same one.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np

from simspec.errors import SimspecError, read_json, require_records
from simspec.schema import Artifact, Record
from simspec.shipped import locate
from simspec.sim.analytic import DEVICES, DeviceSpec
from simspec.sim.costmodel import CostModel, Point
from simspec.sim.trace_files import load_traces
from simspec.sim.traces import TraceSet
from simspec.stats import robust_median

PROFILE_SCHEMA = "simspec-profile"
PROFILE_VERSION = 1


def sample_record(kind: str, n: int, context: int, samples, batch: int = 1, rows: int | None = None) -> dict:
    """One latency sample; ``rows``: of the batch's sequences, how many a draft level runs (None: all)."""
    samples = [float(s) for s in samples]
    q25, q75 = np.percentile(samples, [25, 75])
    record = {"kind": kind, "n": int(n), "context": int(context), "samples": samples,
              "median": robust_median(np.asarray(samples)), "q25": float(q25), "q75": float(q75)}
    if batch != 1:  # batch 1 stays implicit: profiles from before batch sizes keep their hashes
        record["batch"] = int(batch)
    if rows is not None and rows != batch:
        record["rows"] = int(rows)
    return record


def points_of(samples: list[dict], scale: dict[str, float] | None = None) -> list[Point]:
    """The cost model's points (each kind's medians times ``scale[kind]``, default 1)."""
    scale = scale or {}
    return [Point(s["kind"], s["n"], s["context"], s["median"] * scale.get(s["kind"], 1.0), s.get("batch", 1),
                  s.get("rows")) for s in samples]


def cost_model(samples: list[dict], scale: dict[str, float] | None = None) -> CostModel:
    """The cost model of a profile's samples (medians times ``scale[kind]``). An in-situ refit's
    ``projected`` records are interpolated: a fit through them would smooth the per-size ratios away."""
    projected = frozenset((s["kind"], s.get("batch", 1)) for s in samples if s.get("projected"))
    bucketed = frozenset(s["kind"] for s in samples if s.get("bucketed"))  # the compiled runtime's verify
    return CostModel(points_of(samples, scale), projected, bucketed)


def inputs_hash(meta: dict, samples: list[dict]) -> str:
    blob = json.dumps({"meta": {k: meta[k] for k in sorted(meta) if k not in ("created", "inputs_hash")},
                       "samples": samples}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass(frozen=True, kw_only=True)
class TracesRef(Record):
    """A profile's traces: a folder relative to it, their hash, and the tree shape and prompts."""

    path: str
    content_hash: str
    width: int | None = None
    depth_max: int | None = None
    prompts: str | None = None
    positions: int | None = None
    n_prompts: int | None = None


@dataclass(frozen=True, kw_only=True)
class FitError(Record):
    """The cost model's held-out relative error over the measured points."""

    median: float
    p90: float
    points: int | None = None


@dataclass(frozen=True, kw_only=True)
class ProfileMeta(Artifact):
    """``profile.json`` less its samples: what the profile is and what made it."""

    SCHEMA: ClassVar[str] = PROFILE_SCHEMA
    VERSIONS: ClassVar[tuple[int, ...]] = (PROFILE_VERSION,)
    kind: Literal["measured", "analytic", "imported"]
    device: str
    inputs_hash: str
    target: str | None = None
    draft: str | None = None
    gpu: str | None = None
    device_model: str | None = None  # the CPU or GPU model name; None in profiles from before it
    runtime: str | None = None
    engine_runtime: str | None = None  # measured: "eager" or "compiled" (engine.runtime); None: eager, from before
    dtype: str = "fp32"
    temperature: float = 0.0  # of its traces (0: greedy)
    threads: int | None = None
    seed: int | None = None
    created: str | None = None
    simspec_version: str | None = None
    policy_seconds: dict | None = None  # decision latency per policy family, seconds
    policy_seconds_by_depth: dict | None = None  # per family: {"depth": seconds} (None: profiles from before)
    seconds: dict | None = None  # wall time of calibrate's phases
    fit_error: FitError | None = None
    in_situ: dict | None = None  # an in-situ refit: its base profile, split, ratios
    # calibrate's engine fit (measure/engine_fit.py): live / tight-loop ratios, scales, spread, replicates
    engine_fit: dict | None = None
    traces: TracesRef | None = field(default=None, metadata={"what": "an object naming the profile's traces, or null"})


@dataclass(frozen=True, kw_only=True)
class LiveTracesRef(TracesRef):
    # ``field()``: a bare annotation would inherit the parent's default (None) as its own
    width: int = field()
    depth_max: int = field()
    prompts: str = field()


@dataclass(frozen=True, kw_only=True)
class LiveProfileMeta(ProfileMeta):
    """What the live engine is rebuilt from, required: the models and the traces' trees and prompts."""

    target: str = field()
    draft: str = field()
    traces: LiveTracesRef = field()


@dataclass
class Profile:
    directory: Path
    meta: ProfileMeta
    samples: list[dict]
    cost: CostModel
    _traces: TraceSet | None = field(default=None, repr=False, compare=False)  # loaded once, on first use

    @property
    def kind(self) -> str:
        return self.meta.kind

    @property
    def label(self) -> str:
        """How reports and plot titles name it; analytic profiles say so every time."""
        tag = {"analytic": " (ANALYTIC roofline model, not measured)",
               "imported": f" (IMPORTED curves: {self.meta.runtime})"}.get(self.kind, "")
        return f"{self.directory.name}: {self.meta.device}{tag}"

    @property
    def runtime(self) -> str:
        """What prices its cycles: simspec's engine, the roofline's runtime (analytic; older profiles:
        from the device table) or the engine imported curves were measured in."""
        if self.meta.runtime:
            return self.meta.runtime
        if self.kind == "analytic":
            return DEVICES.get(str(self.meta.gpu), DeviceSpec("?", 1, 1)).runtime()
        return f"simspec's engine (Hugging Face, {self.engine_runtime})"

    @property
    def engine_runtime(self) -> str:
        """The runtime simspec's engine measured a measured profile under: eager or compiled."""
        return self.meta.engine_runtime or "eager"

    @property
    def dtype(self) -> str:
        """fp32, bf16 or fp16 (profiles from before ``--dtype`` wrote torch's name)."""
        return dtype_label(self.meta.dtype)

    @property
    def temperature(self) -> float:
        """The sampling temperature its traces were recorded at (0: greedy; older profiles: 0)."""
        return float(self.meta.temperature)

    def require_temperature(self, temperature: float | None) -> None:
        """A requested ``--temperature`` must be the one the traces were recorded at (None: any)."""
        if temperature is not None and temperature != self.temperature:
            raise SimspecError(f"profile {self.directory} holds traces recorded at temperature {self.temperature:g}, "
                               f"not {temperature:g}: use a profile calibrated with `simspec calibrate "
                               f"--temperature {temperature:g}`, or drop --temperature")

    @property
    def traces_dir(self) -> Path | None:
        ref = self.meta.traces
        return None if ref is None else (self.directory / ref.path).resolve()

    def traces(self) -> TraceSet:
        """The profile's traces, checked against it, loaded once per profile object."""
        if self._traces is not None:
            return self._traces
        ref = self.meta.traces
        if ref is None:
            raise SimspecError(f"profile {self.directory} has latency curves only, no traces: "
                               "record traces with `simspec calibrate` for these models")
        traces = load_traces(self.traces_dir)
        if traces.meta.content_hash != ref.content_hash:
            raise SimspecError(f"profile {self.directory} was made with traces {ref.content_hash} but "
                               f"{self.traces_dir} holds {traces.meta.content_hash}: restore those traces, or "
                               f"re-create the profile with `simspec calibrate --traces-from {self.traces_dir} "
                               f"--out {self.directory} --force`")
        for role in ("target", "draft"):
            if getattr(traces.meta, role) != getattr(self.meta, role):
                raise SimspecError(f"traces in {self.traces_dir} belong to {role} {getattr(traces.meta, role)!r}, "
                                   f"but profile {self.directory} is for {getattr(self.meta, role)!r}")
        if traces.temperature != self.temperature:
            raise SimspecError(f"traces in {self.traces_dir} were recorded at temperature {traces.temperature:g}, but "
                               f"profile {self.directory} is for temperature {self.temperature:g}: sampled and greedy "
                               f"traces replay by different rules; re-create the profile with `simspec calibrate "
                               f"--traces-from {self.traces_dir} --temperature {traces.temperature:g}`")
        recorded = dtype_label(traces.meta.dtype)
        if self.kind == "measured" and recorded != self.dtype:
            raise SimspecError(f"traces in {self.traces_dir} were recorded in {recorded}, but profile {self.directory} "
                               f"measured {self.dtype}: trees and latencies must share a dtype; re-create the "
                               f"profile with `simspec calibrate --dtype {recorded}`")
        self._traces = traces
        return traces


def dtype_label(name: str) -> str:
    """A dtype as simspec names it (fp32, bf16, fp16), also from torch's spelling."""
    return {"torch.float32": "fp32", "torch.bfloat16": "bf16", "torch.float16": "fp16"}.get(name, name)


def build_profile(directory: Path, meta: dict, samples: list[dict]) -> Profile:
    """A profile from its metadata and samples, fitted and hashed, in memory."""
    cost = cost_model(samples)
    # A fit error given (calibrate's engine fit: the tight-loop curves' held-out error, which the
    # engine's scaling keeps) stands; else the held-out error of these samples' fits.
    meta = {"schema": PROFILE_SCHEMA, "schema_version": PROFILE_VERSION, **meta,
            "fit": cost.report, "fit_error": meta.get("fit_error") or cost.fit_error()}
    meta["inputs_hash"] = inputs_hash(meta, samples)
    return Profile(directory, ProfileMeta.of(meta), samples, cost)


def save_profile(profile: Profile, directory: Path) -> None:
    """Writes a built profile's ``profile.json`` into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    blob = {**profile.meta.to_json(), "samples": profile.samples}
    (directory / "profile.json").write_text(json.dumps(blob, indent=1))


def write_profile(directory: Path, meta: dict, samples: list[dict]) -> Profile:
    profile = build_profile(directory, meta, samples)
    save_profile(profile, directory)
    return profile


def recreate_advice(directory: Path) -> str:
    """What to do about an unusable profile (``recalibrate`` reads it, so it cannot repair one)."""
    return f"re-create it with `simspec calibrate --out {directory} --force`"


SAMPLE_KEYS = {"kind": str, "n": int, "context": int, "median": float}


def load_profile(path: str | Path) -> Profile:
    """A profile folder (or its ``profile.json``); one clear error for anything unusable."""
    path = locate(path)
    directory = path.parent if path.name == "profile.json" else path
    file = directory / "profile.json"
    fix = recreate_advice(directory)
    blob = read_json(file, "profile ", f"no profile at {directory} (missing profile.json): run "
                     f"`simspec calibrate --out {directory}`", fix)
    meta = ProfileMeta.check(blob, file, fix, leave=("samples",))
    samples = require_records(blob, "samples", SAMPLE_KEYS, file, fix, what="a list of latency samples, objects with "
                              "kind, n, context and median")
    present = {s["kind"] for s in samples}
    missing = [k for k in ("verify", "draft") if k not in present]
    if missing:
        raise SimspecError(f"{file}: field 'samples' has no {' or '.join(missing)} latency samples, which the cost "
                           f"model needs: {fix}")
    try:
        cost = cost_model(samples)
    except (TypeError, KeyError, ValueError, FloatingPointError, np.linalg.LinAlgError) as exc:
        raise SimspecError(f"{file}: field 'samples' holds latencies no cost model fits ({exc.__class__.__name__}): "
                           f"{fix}") from None
    return Profile(directory, meta, samples, cost)


def load_live_profile(path: str | Path, purpose: str) -> Profile:
    """A measured profile with traces, for work (``purpose``, in the errors) that runs the live engine."""
    profile = load_profile(path)
    if profile.kind == "imported":
        raise SimspecError(f"profile {path} prices cycles with curves measured in {profile.meta.runtime}: "
                           f"{purpose} runs simspec's own engine, whose curves these are not. Use a profile measured "
                           "here")
    if profile.kind == "analytic":
        gpu = str(profile.meta.gpu or "another device").upper()
        raise SimspecError(f"profile {path} is an ANALYTIC model of {gpu}: {purpose} runs the "
                           "live engine, which cannot check a model of another device. Use a profile measured here")
    if profile.meta.traces is None:
        raise SimspecError(f"profile {path} has no traces, which {purpose} needs: "
                           "record traces with `simspec calibrate`")
    file, fix = profile.directory / "profile.json", recreate_advice(profile.directory)
    profile.meta = LiveProfileMeta.parse(profile.meta.to_json(), file, fix)
    return profile
