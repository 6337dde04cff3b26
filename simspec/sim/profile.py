"""Profiles: latency measurements (or an analytic model of them) plus the traces they pair with.

``calibration/<name>/profile.json`` holds every latency sample with its operating point, the
fitted cost model's held-out error, what made it (device, models, dtype, threads, simspec
version, seed, creation time) and a reference to its traces: a folder path relative to the
profile plus the traces' content hash. Traces do not depend on the hardware (greedy decoding),
so several profiles can share one trace folder; the hash makes sure it is the same one.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simspec.errors import SimspecError, read_json, require, require_records, require_schema
from simspec.shipped import locate
from simspec.sim.costmodel import CostModel, Point
from simspec.sim.trace_files import load_traces
from simspec.sim.traces import TraceSet
from simspec.stats import robust_median

PROFILE_SCHEMA = "simspec-profile"
PROFILE_VERSION = 1


def sample_record(kind: str, n: int, context: int, samples, batch: int = 1) -> dict:
    samples = [float(s) for s in samples]
    q25, q75 = np.percentile(samples, [25, 75])
    record = {"kind": kind, "n": int(n), "context": int(context), "samples": samples,
              "median": robust_median(np.asarray(samples)), "q25": float(q25), "q75": float(q75)}
    if batch != 1:  # batch 1 stays implicit: profiles from before batch sizes keep their hashes
        record["batch"] = int(batch)
    return record


def points_of(samples: list[dict], scale: dict[str, float] | None = None) -> list[Point]:
    """The cost model's points (each kind's medians times ``scale[kind]``, default 1)."""
    scale = scale or {}
    return [Point(s["kind"], s["n"], s["context"], s["median"] * scale.get(s["kind"], 1.0), s.get("batch", 1))
            for s in samples]


def cost_model(samples: list[dict], scale: dict[str, float] | None = None) -> CostModel:
    """The cost model of a profile's samples (each kind's medians times ``scale[kind]``). Records
    an in-situ refit marked ``projected`` (the base model's value there times the live ratio) are
    interpolated as they are: a fit through them would smooth the per-size ratios away."""
    projected = frozenset(s["kind"] for s in samples if s.get("projected"))
    return CostModel(points_of(samples, scale), projected)


def inputs_hash(meta: dict, samples: list[dict]) -> str:
    blob = json.dumps({"meta": {k: meta[k] for k in sorted(meta) if k not in ("created", "inputs_hash")},
                       "samples": samples}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass
class Profile:
    directory: Path
    meta: dict
    samples: list[dict]
    cost: CostModel
    _traces: TraceSet | None = field(default=None, repr=False, compare=False)  # loaded once, on first use

    @property
    def kind(self) -> str:
        return self.meta["kind"]

    @property
    def label(self) -> str:
        """How reports and plot titles name it; analytic profiles say so every time."""
        tag = {"analytic": " (ANALYTIC roofline model, not measured)",
               "imported": f" (IMPORTED curves: {self.meta.get('runtime')})"}.get(self.kind, "")
        return f"{self.directory.name}: {self.meta['device']}{tag}"

    @property
    def runtime(self) -> str:
        """What prices its cycles: simspec's engine (measured), the roofline's runtime assumption
        (analytic; profiles made before it was stored take it from the same device table), or the
        engine that imported curves were measured in."""
        if self.meta.get("runtime"):
            return self.meta["runtime"]
        if self.kind == "analytic":
            from simspec.sim.analytic import DEVICES, DeviceSpec

            return DEVICES.get(str(self.meta.get("gpu")), DeviceSpec("?", 1, 1)).runtime()
        return "simspec's engine (Hugging Face, eager)"

    @property
    def dtype(self) -> str:
        """fp32, bf16 or fp16 (profiles from before ``--dtype`` wrote torch's name)."""
        return dtype_label(self.meta.get("dtype", "fp32"))

    @property
    def temperature(self) -> float:
        """The sampling temperature its traces were recorded at (0: greedy; older profiles: 0)."""
        return float(self.meta.get("temperature") or 0.0)

    def require_temperature(self, temperature: float | None) -> None:
        """A requested ``--temperature`` must be the one the traces were recorded at (None: any)."""
        if temperature is not None and temperature != self.temperature:
            raise SimspecError(f"profile {self.directory} holds traces recorded at temperature {self.temperature:g}, "
                               f"not {temperature:g}: use a profile calibrated with `simspec calibrate "
                               f"--temperature {temperature:g}`, or drop --temperature")

    @property
    def traces_dir(self) -> Path | None:
        ref = self.meta.get("traces")
        return None if not ref else (self.directory / ref["path"]).resolve()

    def traces(self) -> TraceSet:
        """The profile's traces, checked against it (loaded once per profile object: a request's
        ``check()`` reads them before any work, and the work then uses the same ones)."""
        if self._traces is None:
            self._traces = self._load_traces()
        return self._traces

    def _load_traces(self) -> TraceSet:
        ref = self.meta.get("traces")
        if not ref:
            raise SimspecError(f"profile {self.directory} has latency curves only, no traces: "
                               "record traces with `simspec calibrate` for these models")
        traces = load_traces(self.traces_dir)
        if traces.meta.get("content_hash") != ref["content_hash"]:
            raise SimspecError(f"profile {self.directory} was made with traces {ref['content_hash']} but "
                               f"{self.traces_dir} holds {traces.meta.get('content_hash')}: restore those traces, or "
                               f"re-create the profile with `simspec calibrate --traces-from {self.traces_dir} "
                               f"--out {self.directory} --force`")
        for role in ("target", "draft"):
            if traces.meta.get(role) != self.meta.get(role):
                raise SimspecError(f"traces in {self.traces_dir} belong to {role} {traces.meta.get(role)!r}, "
                                   f"but profile {self.directory} is for {self.meta.get(role)!r}")
        if traces.temperature != self.temperature:
            raise SimspecError(f"traces in {self.traces_dir} were recorded at temperature {traces.temperature:g}, but "
                               f"profile {self.directory} is for temperature {self.temperature:g}: sampled and greedy "
                               f"traces replay by different rules; re-create the profile with `simspec calibrate "
                               f"--traces-from {self.traces_dir} --temperature {traces.temperature:g}`")
        recorded = dtype_label(traces.meta.get("dtype", "fp32"))
        if self.kind == "measured" and recorded != self.dtype:
            raise SimspecError(f"traces in {self.traces_dir} were recorded in {recorded}, but profile {self.directory} "
                               f"measured {self.dtype}: trees and latencies must share a dtype; re-create the "
                               f"profile with `simspec calibrate --dtype {recorded}`")
        return traces


def dtype_label(name: str) -> str:
    """A dtype as simspec names it (fp32, bf16, fp16), also from torch's spelling."""
    return {"torch.float32": "fp32", "torch.bfloat16": "bf16", "torch.float16": "fp16"}.get(name, name)


def build_profile(directory: Path, meta: dict, samples: list[dict]) -> Profile:
    """A profile from its metadata and samples, fitted and hashed, in memory (``directory``: where
    it is, or will be, written)."""
    cost = cost_model(samples)
    meta = {"schema": PROFILE_SCHEMA, "schema_version": PROFILE_VERSION, **meta,
            "fit": cost.report, "fit_error": cost.fit_error()}
    meta["inputs_hash"] = inputs_hash(meta, samples)
    return Profile(directory, meta, samples, cost)


def save_profile(profile: Profile, directory: Path) -> None:
    """Writes a built profile's ``profile.json`` into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "profile.json").write_text(json.dumps({**profile.meta, "samples": profile.samples}, indent=1))


def write_profile(directory: Path, meta: dict, samples: list[dict]) -> Profile:
    profile = build_profile(directory, meta, samples)
    save_profile(profile, directory)
    return profile


def recreate_advice(directory: Path) -> str:
    """What to do about an unusable profile (``recalibrate`` reads the profile it refits, so it
    cannot repair one)."""
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
    require_schema(blob, PROFILE_SCHEMA, PROFILE_VERSION, file, fix)
    require(blob, "kind", str, file, fix)
    if blob["kind"] not in ("measured", "analytic", "imported"):
        raise SimspecError(f"{file}: field 'kind' must be measured, analytic or imported (found {blob['kind']!r}): "
                           f"{fix}")
    for key in ("device", "inputs_hash"):
        require(blob, key, str, file, fix)
    for key in ("target", "draft", "gpu"):
        require(blob, key, str, file, fix, optional=True)
    require(blob, "policy_seconds", dict, file, fix, optional=True)
    require(blob, "temperature", (int, float), file, fix, optional=True)
    ref = require(blob, "traces", dict, file, fix, what="an object naming the profile's traces, or null", optional=True)
    if ref is not None:
        require(ref, "path", str, file, fix, name="traces.path")
        require(ref, "content_hash", str, file, fix, name="traces.content_hash")
        for key in ("width", "depth_max"):
            require(ref, key, int, file, fix, name=f"traces.{key}", optional=True)
        require(ref, "prompts", str, file, fix, name="traces.prompts", optional=True)
    samples = require_records(blob, "samples", SAMPLE_KEYS, file, fix, what="a list of latency samples, objects with "
                              "kind, n, context and median")
    blob.pop("samples")
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
    return Profile(directory, blob, samples, cost)


def load_live_profile(path: str | Path, purpose: str) -> Profile:
    """A measured profile with traces, for work that runs the live engine against it
    (``purpose`` says which, in the errors)."""
    profile = load_profile(path)
    if profile.kind == "imported":
        raise SimspecError(f"profile {path} prices cycles with curves measured in {profile.meta.get('runtime')}: "
                           f"{purpose} runs simspec's own engine, whose curves these are not. Use a profile measured "
                           "here")
    if profile.kind == "analytic":
        gpu = str(profile.meta.get("gpu") or "another device").upper()
        raise SimspecError(f"profile {path} is an ANALYTIC model of {gpu}: {purpose} runs the "
                           "live engine, which cannot check a model of another device. Use a profile measured here")
    if not profile.meta.get("traces"):
        raise SimspecError(f"profile {path} has no traces, which {purpose} needs: "
                           "record traces with `simspec calibrate`")
    # What the live engine is built from: the models, and the trees the traces were drafted with.
    file, fix = profile.directory / "profile.json", recreate_advice(profile.directory)
    for key in ("target", "draft"):
        require(profile.meta, key, str, file, fix)
    ref = profile.meta["traces"]
    for key in ("width", "depth_max"):
        require(ref, key, int, file, fix, name=f"traces.{key}")
    require(ref, "prompts", str, file, fix, name="traces.prompts")
    return profile
