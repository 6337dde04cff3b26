"""``simspec calibrate``: latency curves measured here or modelled for an absent GPU (ANALYTIC), the
decisions timed on this host, and traces recorded or reused, into one profile (or traces) folder."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from simspec import __version__, flags
from simspec.cluster import check_ray
from simspec.engine.formats import draft_help
from simspec.errors import SimspecError
from simspec.flags import opt
from simspec.measure import Bar
from simspec.measure.engine_fit import fit_prompts
from simspec.measure.traces_from import traces_source

ARCH_TARGETS = {"arch:llama-3.1-8b": "Llama-3.1-8B-class target (32 layers, hidden 4096, GQA 32/8, vocab 128,256) "
                                     "with an EAGLE-3-style one-layer draft (32k draft vocabulary)"}
GPU_NAMES = ("auto", "cpu", "a100", "h100", "h200", "a40", "l4", "rtx3090", "rtx4090", "v100")


@dataclass(frozen=True, kw_only=True)
class CalibrateRequest:
    gpu: str = opt("auto", "auto (the device present), cpu, or a GPU name: a100, h100, h200, a40, l4, rtx3090, "
                   "rtx4090, v100. A named GPU that torch does not see gets an ANALYTIC roofline profile, marked as "
                   "such everywhere.")
    target: str = flags.target()
    draft: str = flags.draft(draft_help)
    prompts: str = flags.prompts()
    n_prompts: int = flags.n_prompts(164)
    max_new_tokens: int = flags.max_new_tokens(128, min=2)
    depth_max: int = opt(12, "Tree levels recorded (root included).", min=2, max=32)
    width: int = opt(10, "Beam width W of the recorded trees.", min=1, max=32)
    traces_from: str | None = opt(None, "Reuse traces (a traces folder or a profile with traces; same models) "
                                  "instead of recording them.")
    no_traces: bool = opt(False, "Latency curves only.", flag="--no-traces")
    traces_only: bool = opt(False, "Record traces only, into --out (a traces folder that profiles then name with "
                            "--traces-from). No timing: may share the machine.", flag="--traces-only")
    check_prompts: int = opt(4, "Prompts for the replay check (live engine vs trace, per cycle).", min=0)
    check_tokens: int = opt(48, "New tokens per replay-check run.", min=2)
    quick: bool = opt(False, "A small latency grid (tests, demo).")
    engine_prompts: int | None = opt(None, "The engine fit: train prompts on which plain decoding and a ladder of "
                                     "static trees run on the live engine, to which the tight-loop curves are then "
                                     "scaled, so that the profile prices what the engine spends (default 3 with "
                                     "--quick, else 8; 0: the tight-loop curves as they are).", min=0)
    engine_tokens: int | None = opt(None, "The engine fit: new tokens per run (default 32 with --quick, else 48).",
                                    min=4)
    engine_ladder: str | None = opt(None, "The engine fit: its static trees, full (17, V 2-128), quick (12, V 2-64) "
                                    "or depth:size pairs such as 3:4,4:8 (the sizes you will run; others take the "
                                    "nearest sizes' scales); default quick with --quick, else full.")
    out: str | None = flags.out()
    force: bool = flags.force()
    seed: int = flags.seed()
    dtype: str = flags.dtype()
    temperature: float = flags.temperature(0.0)
    top_p: float = flags.top_p()
    nodes: int = opt(64, "T > 0: the largest V (root included) the traces support; recording costs one target "
                     "forward over about this many nodes per position.", min=2)
    ray: str | None = flags.ray()
    import_curves: str | None = opt(None, "Build the profile from latency curves measured in another engine (the "
                                    "server you deploy: JSON or CSV, schema in docs/calibration.md), paired with "
                                    "--traces-from; no models are loaded. The profile is marked IMPORTED and cannot "
                                    "be validated with simspec's engine.")
    batch_sizes: tuple[int, ...] = flags.batch_sizes((1,), parse=flags.ints)
    runtime: str = flags.runtime()
    workers: int = flags.workers(2)

    def sampling(self):
        from simspec.engine.sampling import Sampling

        return Sampling(self.temperature, self.top_p, self.seed)

    def out_dir(self) -> Path:
        if self.out:
            return Path(self.out)
        suffix = f"-T{self.temperature:g}" if self.temperature > 0 else ""
        if self.traces_only:
            return Path(f"calibration/traces-{Path(self.prompts).stem}-{Path(self.draft).name}{suffix}")
        return Path(f"calibration/{self.gpu.lower()}-{Path(self.draft).name}{suffix}")

    def check(self) -> Plan:
        """Every flag, the output folder, reused traces and the prompts, before any model loads."""
        from simspec.cache import check_out
        from simspec.data import load_prompts
        from simspec.engine.models import resolve_dtype
        from simspec.engine.runtime import check_runtime

        resolve_dtype(self.dtype)
        self.sampling()
        if self.engine_ladder:
            from simspec.measure.insitu import ladder_points

            ladder_points(self.engine_ladder, "--engine-ladder")
        check_runtime(self.runtime)
        if self.runtime == "compiled" and max(self.batch_sizes, default=1) > 1:
            raise SimspecError("calibrate --runtime compiled measures batch 1 only: use --batch-sizes 1, or --runtime "
                               "eager for the batch curves")
        if self.temperature > 0 and not 2 <= self.nodes <= 4096:
            raise SimspecError(f"--nodes must be in 2..4096 (the largest V sampled traces support), got {self.nodes}")
        if not self.batch_sizes or any(not 1 <= b <= 256 for b in self.batch_sizes) or 1 not in self.batch_sizes:
            raise SimspecError(f"--batch-sizes takes batch sizes in 1..256 and includes 1 (the curves every profile "
                               f"has), e.g. 1,2,4,8; got {','.join(map(str, self.batch_sizes))}")
        if self.import_curves:
            return self._check_import(check_out)
        gpu = self.gpu.lower()
        if gpu not in GPU_NAMES:
            raise SimspecError(f"unknown --gpu {gpu!r}: choose one of {', '.join(GPU_NAMES)}")
        check_out(self.out_dir(), self.force)
        source = (traces_source(self.traces_from, self.target, self.draft, self.dtype, self.temperature)
                  if self.traces_from else None)
        # Last of the file checks: asking torch whether the named GPU is here takes a second.
        kind = "measured" if gpu in ("cpu", "auto") or gpu_present(gpu) else "analytic"
        self._check_fit_flags(kind)
        if self.target in ARCH_TARGETS and kind == "measured":
            raise SimspecError(f"--target {self.target} is an architecture without weights: use it with an absent "
                               "--gpu (analytic), e.g. --gpu h100")
        if self.traces_only and (self.no_traces or source or self.target in ARCH_TARGETS):
            raise SimspecError("--traces-only records traces: it needs real models and no --no-traces / --traces-from")
        models = self.target not in ARCH_TARGETS
        chosen = load_prompts(self.prompts, n=self.n_prompts) if models and not (self.no_traces or source) else []
        if self.ray is not None and not chosen:
            raise SimspecError("--ray shards trace recording: use it where traces are recorded (--traces-only, or a "
                               "calibration without --traces-from / --no-traces)")
        check_ray(self)
        return Plan(gpu, kind, source, chosen, fit_prompts(self, kind, source))

    def _check_fit_flags(self, kind: str) -> None:
        """The engine fit's flags, refused where no engine of the profile's runs here (not ignored)."""
        fit = flags.given(self, ("engine_prompts", "engine_tokens", "engine_ladder"))
        if fit and kind != "measured":
            raise SimspecError(f"{', '.join(fit)}: the engine fit times the live engine on this machine; an {kind} "
                               "profile's curves are not this machine's, so it has none to fit")
        if fit and self.traces_only:
            raise SimspecError(f"{', '.join(fit)}: the engine fit scales latency curves, which --traces-only does not "
                               "measure: fit them where a profile names the traces (--traces-from)")

    def _check_import(self, check_out) -> Plan:
        """--import-curves: the file, the traces it pairs with, the output folder; no models."""
        from simspec.sim.imported import load_curves

        if self.traces_only or self.ray is not None:
            raise SimspecError("--import-curves builds a profile from curves measured elsewhere: it records no traces "
                               "(drop --traces-only / --ray; pair it with --traces-from or --no-traces)")
        if not (self.traces_from or self.no_traces):
            raise SimspecError("--import-curves needs the trees the curves will price: --traces-from TRACES (recorded "
                               "by `simspec calibrate --traces-only` for the same target and drafter), or --no-traces")
        self._check_fit_flags("imported")
        check_ray(self)
        check_out(self.out_dir(), self.force)
        load_curves(self.import_curves)
        # dtype None: the server's may differ from the one the trees were drafted in (not refused here)
        source = self.traces_from and traces_source(self.traces_from, self.target, self.draft, None, self.temperature)
        return Plan("imported", "imported", source or None, [])


@dataclass(frozen=True)
class Plan:
    """What ``CalibrateRequest.check`` found: the device kind, reused traces, prompts to record."""

    gpu: str
    kind: str  # measured or analytic
    source: tuple[Path, dict, int] | None  # (folder, reference, reach) of reused traces (``traces_source``)
    prompts: list = field(default_factory=list)
    fit_prompts: list = field(default_factory=list)  # train prompts of the engine fit


def gpu_present(gpu: str) -> bool:
    """Whether torch sees the named GPU ('h100' in 'NVIDIA H100 80GB HBM3', 'rtx4090' as '4090')."""
    import torch

    from simspec.machine import device_model

    return torch.cuda.is_available() and gpu.replace("rtx", "") in device_model("cuda:0").lower().replace(" ", "")


def policy_seconds(samples: list[dict], width: int, depth: int, repeats: int) -> dict:
    """The profile's decision-time fields on this host (the policies run here whatever the
    accelerator): ``policy_seconds_by_depth``, each baseline family's seconds per cycle at a few
    depths, and ``policy_seconds``, the same at the deepest tree with RADAR's LSTM call, which its
    training charges (stored, so that one seed gives one policy)."""
    from simspec.policies.registry import timing_policies
    from simspec.policies.timing import policy_latency_by_depth
    from simspec.sim.costmodel import CostModel
    from simspec.sim.profile import points_of
    from simspec.train.radar import RADAR_TIMING_KEY, radar_call_seconds

    by_depth = policy_latency_by_depth(timing_policies(CostModel(points_of(samples)), width, depth), width, depth,
                                       repeats)
    seconds = {name: timed[str(max(2, depth))] for name, timed in by_depth.items()}
    seconds[RADAR_TIMING_KEY] = radar_call_seconds(width, depth, 60)
    return {"policy_seconds": seconds, "policy_seconds_by_depth": by_depth}


def calibrate(request: CalibrateRequest, bar: Bar, status: Callable[[str], object], plan: Plan | None = None) -> dict:
    """Runs the request; returns the ``--json`` summary (a profile's, or a traces folder's)."""
    import torch

    r = request
    plan = plan or r.check()
    if plan.kind == "imported":
        return _imported(r, plan)
    torch.manual_seed(r.seed)
    run_device = "cuda" if torch.cuda.is_available() and plan.kind == "measured" and plan.gpu != "cpu" else "cpu"
    loaded, drafter, shapes = _models(r, plan, run_device, status)
    curves = _curves(r, plan, loaded, drafter, shapes, bar)
    source, samples = plan.source, curves.samples
    width, depth = (source[1]["width"], source[1]["depth_max"]) if source else (r.width, r.depth_max)
    fit = None
    if plan.fit_prompts:  # the tight loops' curves scaled to whole engine cycles, right after them
        from simspec.measure.engine_fit import fit_engine

        fit = fit_engine(loaded, drafter, r, source, samples, width, plan.fit_prompts, bar)
        samples = fit.samples
    decisions = policy_seconds(samples, width, depth, _grid(r).repeats * 5) if samples else {"policy_seconds": {}}
    if plan.prompts:
        from simspec.measure.record_traces import record_traces

        traces, record_s, checks = record_traces(loaded, drafter, r, plan.prompts, bar)
    else:
        traces, record_s, checks = None, 0.0, []
    meta = _meta(r, plan, run_device, shapes, curves, fit, record_s, checks, decisions, loaded)
    return _write(r, plan, meta, samples, traces)


def _grid(r: CalibrateRequest):
    from simspec.measure.curves import CurveGrid  # torch: not on the CLI's start

    return CurveGrid.quick() if r.quick else CurveGrid()


@dataclass(frozen=True)
class _Curves:
    """The latency curves' samples, the device as the profile names it, an analytic runtime, the seconds."""

    samples: list[dict]
    device: str
    runtime: str | None
    seconds: float


def _models(r: CalibrateRequest, plan: Plan, run_device: str, status: Callable[[str], object]):
    """The loaded pair (none where the shapes alone serve: an analytic profile, an architecture), shapes."""
    from simspec.measure.curves import drafter_architecture, pair_shapes, target_architecture
    from simspec.sim.analytic import LLAMA31_8B, LLAMA31_8B_DRAFT

    if r.target in ARCH_TARGETS:  # an architecture alone, no models
        return None, None, (LLAMA31_8B, LLAMA31_8B_DRAFT)
    from simspec.engine.load import load_pair
    from simspec.fingerprint import check_fingerprint

    if plan.source:  # curves measured with another drafter than the one that drafted the traces would not fit them
        check_fingerprint(plan.source[1].get("draft_fingerprint"), r.draft, f"--traces-from {r.traces_from}")
    shapes = pair_shapes(r.target, r.draft) if plan.kind == "analytic" and not plan.prompts else None
    if shapes is not None:  # modelled curves need the shapes: the weights stay on disk
        return None, None, shapes
    loaded, drafter = load_pair(r.target, r.draft, run_device, status, r.dtype)
    return loaded, drafter, (target_architecture(loaded.model.config), drafter_architecture(drafter))


def _curves(r: CalibrateRequest, plan: Plan, loaded, drafter, shapes, bar: Bar) -> _Curves:
    """The latency curves: measured on the device, or modelled for an absent GPU; none for traces alone."""
    from simspec.machine import device_label
    from simspec.measure import curves
    from simspec.sim.analytic import device_spec

    if r.traces_only:
        return _Curves([], "none (traces only)", None, 0.0)
    longest = _longest_context(r, plan, loaded)
    grid, batched, started = _grid(r).covering(longest), curves.BatchGrid().covering(longest), time.perf_counter()
    if plan.kind == "measured":
        samples = curves.measure_curves(loaded, drafter, grid, bar("latency curves", grid.count()), r.sampling(),
                                        r.runtime)
        if len(r.batch_sizes) > 1:
            samples += curves.measure_batched(loaded, drafter, r.batch_sizes, batched,
                                              bar(f"batched curves (B = {','.join(map(str, r.batch_sizes))})",
                                                  batched.count(r.batch_sizes)))
        return _Curves(samples, device_label(str(loaded.device)), None, time.perf_counter() - started)
    spec, (target_arch, draft_arch) = device_spec(plan.gpu), shapes
    book = curves.bookkeeping_latency(grid.book_sizes, grid.book_depths, grid.book_width, grid.book_repeats,
                                      bar("host bookkeeping", len(grid.book_sizes) * len(grid.book_depths)),
                                      sampling=r.sampling())
    samples = curves.analytic_curves(spec, target_arch, draft_arch, grid, book) + curves.analytic_batched(
        spec, target_arch, draft_arch, r.batch_sizes, batched)
    device = f"{plan.gpu.upper()} (analytic: {spec.tflops:g} TFLOP/s, {spec.bandwidth_gbs:g} GB/s)"
    return _Curves(samples, device, spec.runtime(), time.perf_counter() - started)


def _longest_context(r: CalibrateRequest, plan: Plan, loaded) -> int:
    """The longest context the profile's traces reach (prompt, new tokens and a tree): its curves reach it too."""
    if plan.source:
        return plan.source[2]
    if plan.prompts and loaded is not None:
        from simspec.data import render_chat

        return max(len(render_chat(loaded.tokenizer, p.text)) for p in plan.prompts) + r.max_new_tokens + r.depth_max
    return 0


def _meta(r: CalibrateRequest, plan: Plan, run_device: str, shapes, curves: _Curves, fit, record_s: float,
          checks: list, decisions: dict, loaded) -> dict:
    """The profile's description of itself (``simspec.sim.profile.ProfileMeta``)."""
    import torch

    from simspec.engine.runtime import compiled_seconds
    from simspec.machine import device_model, machine

    named, (target_arch, draft_arch) = r.target not in ARCH_TARGETS, shapes
    meta = {
        "simspec_version": __version__, "kind": plan.kind, "gpu": plan.gpu, "device": curves.device,
        "device_model": device_model(run_device) if plan.kind == "measured" else plan.gpu.upper(),
        "target": r.target, "draft": r.draft if named else "eagle3-style one-layer draft",
        "architecture": {"target": target_arch.to_dict(), "draft": draft_arch.to_dict()},
        "dtype": r.dtype if named else "bf16 (modelled)",
        "threads": torch.get_num_threads(), "seed": r.seed, "grid": "quick" if r.quick else "full",
        "temperature": r.temperature, "batch_sizes": list(r.batch_sizes),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine(run_device),
        "seconds": {"curves": round(curves.seconds, 1), "traces": round(record_s, 1),
                    **({"engine_fit": fit.record["seconds"]} if fit else {})},
        "replay_check": [c.to_dict() for c in checks],
        **decisions,
    }
    if fit:
        meta.update(engine_fit=fit.record, fit_error=fit.tight_fit_error)
    if r.target in ARCH_TARGETS:
        meta["target_description"] = ARCH_TARGETS[r.target]
    if plan.kind == "analytic":
        meta["runtime"] = curves.runtime
    elif plan.kind == "measured":
        meta["engine_runtime"] = r.runtime
        if r.runtime == "compiled":
            meta["seconds"]["compile"] = round(compiled_seconds(loaded), 1)
    return meta


def _write(r: CalibrateRequest, plan: Plan, meta: dict, samples: list[dict], traces) -> dict:
    """The traces folder (``traces_only``) or the profile, whole or not at all; its summary."""
    from simspec.cache import atomic_directory
    from simspec.sim.profile import write_profile
    from simspec.sim.trace_files import save_traces

    out_dir = r.out_dir()
    if r.traces_only:
        with atomic_directory(out_dir, replace=r.force) as tmp:
            traces.meta = traces.meta.with_(replay_check=meta["replay_check"], machine=meta["machine"])
            save_traces(tmp, traces)
        return {"traces": str(out_dir), "prompts": traces.n_prompts, "positions": traces.positions,
                "megabytes": sum(f.stat().st_size for f in out_dir.iterdir()) / 1e6,
                "record_seconds": meta["seconds"]["traces"], "replay_check": meta["replay_check"]}
    with atomic_directory(out_dir, replace=r.force) as tmp:
        meta["traces"] = source_reference(plan.source, out_dir) if plan.source else None
        if traces is not None:  # recorded here (never beside reused ones)
            content = save_traces(tmp / "traces", traces)
            meta["traces"] = {"path": "traces", "content_hash": content, "positions": traces.positions,
                              "n_prompts": traces.n_prompts, "prompts": r.prompts, "depth_max": r.depth_max,
                              "width": r.width, "temperature": r.temperature}
        profile = write_profile(tmp, meta, samples)
    return profile_summary(out_dir, profile)


def source_reference(source: tuple[Path, dict, int], out_dir: Path) -> dict:
    """A profile's reference to reused traces, by a path relative to the profile."""
    return {**source[1], "path": os.path.relpath(source[0], out_dir.resolve())}


def profile_summary(out_dir: Path, profile) -> dict:
    """The ``--json`` line of a written profile."""
    meta, fit, traces = profile.meta, profile.meta.fit_error, profile.meta.traces
    return {"profile": str(out_dir), "device": meta.device, "device_model": meta.device_model, "kind": meta.kind,
            "fit_error_median": fit.median, "fit_error_p90": fit.p90,
            "prompts": (traces and traces.n_prompts) or 0, "positions": (traces and traces.positions) or 0,
            "seconds": meta.seconds, "replay_check": meta.extra("replay_check"),
            **({"engine_fit": {k: meta.engine_fit[k] for k in ("live_over_tight_loop", "spread", "cycles",
                                                               "prompt_ids", "seconds", "batches", "tight_loop_pace")
                               if k in meta.engine_fit}}
               if meta.engine_fit else {})}


def _imported(r: CalibrateRequest, plan: Plan) -> dict:
    """A profile from curves measured in another engine (only the policies' decisions are timed here)."""
    from simspec.machine import machine
    from simspec.sim.imported import load_curves, runtime_label

    source = plan.source
    curves, samples = load_curves(r.import_curves)
    runtime = runtime_label(curves)
    width, depth = (source[1]["width"], source[1]["depth_max"]) if source else (r.width, r.depth_max)
    meta = {
        "simspec_version": __version__, "kind": "imported", "gpu": None,
        "device": f"{curves['device']}, imported curves of {runtime}",
        "device_model": curves["device"], "runtime": runtime, "engine": curves["engine"],
        "curves_file": str(r.import_curves), "target": curves.get("target", r.target),
        "draft": curves.get("draft", r.draft), "dtype": curves.get("dtype", "unknown"), "seed": r.seed,
        "temperature": r.temperature, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(), "seconds": {"curves": 0.0, "traces": 0.0}, "replay_check": [],
        **policy_seconds(samples, width, depth, 25),
    }
    if source and (meta["target"], meta["draft"]) != (r.target, r.draft):
        raise SimspecError(f"curves {r.import_curves} are for {meta['target']} + {meta['draft']}, but the traces "
                           f"are for {r.target} + {r.draft}: the trees and their prices must be of the same models")
    return _write(r, plan, meta, samples, None)
