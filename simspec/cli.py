"""The ``simspec`` command: the only place that parses flags or prints for a person."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Optional

import numpy as np
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from simspec import __version__
from simspec.errors import SimspecError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="simspec: calibrate speculative decoding once, simulate it fast, train tree policies, validate on real models.",
)
# Wide enough for the tables when stdout is a file or a pipe (rich would assume 80 columns).
out = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True)


def _int_list(text: str, flag: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise SimspecError(f"{flag} takes comma-separated integers, got {text!r}") from None
    if not values:
        raise SimspecError(f"{flag} is empty")
    bad = [v for v in values if v < 1]
    if bad:
        letter = {"--depths": "D", "--widths": "W", "--sizes": "V"}.get(flag, flag)
        raise SimspecError(f"{flag}: {letter} must be >= 1, got {bad[0]}")
    return values


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=err,
        transient=False,
    )


def _bars(progress: Progress):
    """``bar(description, total)`` -> a function that advances that new bar by n (default 1)."""
    def bar(description: str, total: int):
        task = progress.add_task(description, total=total)
        return lambda n=1: progress.advance(task, n)

    return bar


def _set_threads(threads: Optional[int]) -> None:
    import torch

    torch.set_num_threads(threads or os.cpu_count() or 1)


def _device(name: str) -> str:
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise SimspecError("--device cuda: torch sees no CUDA device here (use --device cpu)")
    if name not in ("cpu", "cuda"):
        raise SimspecError(f"--device must be auto, cpu or cuda, got {name!r}")
    return name


def _version_callback(value: bool) -> None:
    if value:
        out.print(f"simspec {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version_callback, is_eager=True, help="Print the version."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log what simspec does."),
) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(message)s")


TARGET_HELP = "Target: a built-in name (smollm2-135m-instruct), a Hugging Face model directory, or a .gguf file."
DRAFT_HELP = (
    "Draft: 'eagle' (the shipped EAGLE-style drafter), 'lm' (the shipped standalone draft LM), a simspec drafter directory, "
    "'target-layers:N' (the target's first N layers with its norm and head, a zero-training stand-in), "
    "'target' (the target itself: everything is accepted), or a model directory / .gguf sharing the target's tokenizer."
)
PROMPTS_HELP = "Prompt set: humaneval, sharegpt, or a JSONL file with a 'prompt' string or 'turns' list per line."


@app.command("bench-engine")
def bench_engine(
    target: str = typer.Option("smollm2-135m-instruct", help=TARGET_HELP),
    draft: str = typer.Option("eagle", help=DRAFT_HELP),
    prompts: str = typer.Option("humaneval", help=PROMPTS_HELP),
    split: str = typer.Option("heldout", help="Which fixed split of the prompts: heldout, train or all."),
    n_prompts: int = typer.Option(3, "--n-prompts", min=1, help="How many prompts (first N of the split)."),
    offset: int = typer.Option(0, min=0, help="Skip this many prompts of the split first (to run a long grid in chunks)."),
    max_new_tokens: int = typer.Option(48, "--max-new-tokens", min=1, help="Tokens to generate per prompt."),
    depths: str = typer.Option("1,3,5", help="Tree depths D (levels, root included; D-1 draft steps)."),
    widths: str = typer.Option("1,4", help="Beam widths W (top-k per expanded node)."),
    sizes: str = typer.Option("6,12", help="Verified nodes V (root included): the target's tokens per forward."),
    repeats: int = typer.Option(1, min=1, help="Passes over the prompt set (speedup per prompt = median over passes)."),
    device: str = typer.Option("auto", help="auto, cpu or cuda."),
    threads: Optional[int] = typer.Option(None, help="torch CPU threads (default: all cores)."),
    as_json: bool = typer.Option(False, "--json", help="End stdout with one JSON line of the results."),
) -> None:
    """Real engine: every static (D, W, V) tree vs plain greedy decoding on the same prompts,
    interleaved; median speedup, acceptance length tau, time shares, and a lossless check."""
    from simspec.data import load_prompts, render_chat
    from simspec.measure.bench import config_grid, run_bench
    from simspec.engine.load import load_drafter
    from simspec.engine.speculative import SpeculativeEngine
    from simspec.engine.models import load_model

    configs = config_grid(_int_list(depths, "--depths"), _int_list(widths, "--widths"), _int_list(sizes, "--sizes"))
    chosen = load_prompts(prompts, split=None if split == "all" else _split(split), n=offset + n_prompts)[offset:]
    if not chosen:
        raise SimspecError(f"--offset {offset} skips every prompt of {prompts} ({split})")
    _set_threads(threads)
    with err.status(f"loading {target} and draft {draft}"):
        loaded = load_model(target, device=_device(device))
        drafter = load_drafter(draft, loaded)
    engine = SpeculativeEngine(loaded, drafter)
    prompt_ids = [(p.id, render_chat(loaded.tokenizer, p.text)) for p in chosen]
    for pid, ids in prompt_ids:
        engine.check_length(ids, max_new_tokens)

    with _progress() as progress:
        task = progress.add_task("bench-engine", total=repeats * len(prompt_ids) * (len(configs) + 1))
        results = run_bench(engine, prompt_ids, configs, max_new_tokens, lambda: progress.advance(task), repeats)

    rows = [r.summary() for r in results]
    best = max(rows, key=lambda r: r["speedup"])
    title = (
        f"bench-engine: target {target}, draft {draft}, {len(prompt_ids)} {prompts} ({split}) prompts, "
        f"{max_new_tokens} new tokens, device {loaded.device}"
    )
    _print_bench_table(title, rows, best)
    for row in rows:
        for d in row["divergences"]:
            err.print(f"[yellow]{row['depth']}/{row['width']}/{row['size']} prompt {d['prompt']}: "
                      f"differs at token {d['position']}, top-2 logit gap {d['top2_gap']:.2e}[/]")
    if as_json:
        keep = ("depth", "width", "size", "speedup", "speedup_q25", "speedup_q75", "repeat_medians", "tau", "lossless",
                "exact_match")
        slim = [{k: r[k] for k in keep} | {"time_shares": r["time_shares"], "divergences": r["divergences"]}
                for r in rows]
        print(json.dumps({
            "target": target, "draft": draft, "prompts": prompts, "split": split, "n_prompts": len(prompt_ids),
            "prompt_ids": [pid for pid, _ in prompt_ids],
            "max_new_tokens": max_new_tokens, "repeats": repeats, "device": str(loaded.device),
            "threads": _threads(), "simspec_version": __version__, "configs": slim, "best": {k: best[k] for k in keep},
        }))


@app.command("latency")
def latency(
    target: str = typer.Option("smollm2-135m-instruct", help=TARGET_HELP),
    draft: str = typer.Option("eagle", help=DRAFT_HELP),
    sizes: str = typer.Option("1,2,4,8,12,16,24,32,48,64,96,128", help="Target forward sizes V (tokens)."),
    contexts: str = typer.Option("64,256,1024", help="Context lengths L already in the KV cache."),
    widths: str = typer.Option("1,2,4,6,8,10", help="Draft step widths W (frontier nodes expanded)."),
    repeats: int = typer.Option(7, min=3, help="Timed repeats per point (after 2 warm-up calls)."),
    device: str = typer.Option("auto", help="auto, cpu or cuda."),
    threads: Optional[int] = typer.Option(None, help="torch CPU threads (default: all cores)."),
    as_json: bool = typer.Option(False, "--json", help="End stdout with one JSON line of every sample."),
) -> None:
    """Latency tables: one target forward vs V and L, one draft step vs W and L (median, IQR)."""
    from simspec.engine.load import load_drafter
    from simspec.engine.models import load_model
    from simspec.measure.profiler import draft_latency, target_latency

    size_list, context_list = _int_list(sizes, "--sizes"), _int_list(contexts, "--contexts")
    width_list = _int_list(widths, "--widths")
    _set_threads(threads)
    with err.status(f"loading {target} and draft {draft}"):
        loaded = load_model(target, device=_device(device))
        drafter = load_drafter(draft, loaded)
    with _progress() as progress:
        task = progress.add_task("latency", total=len(context_list) * (len(size_list) + len(width_list)))
        tick = lambda: progress.advance(task)  # noqa: E731
        verify = target_latency(loaded, size_list, context_list, repeats, tick)
        drafts = draft_latency(drafter, loaded.model.config.vocab_size, width_list, context_list, repeats,
                               loaded.device, tick)
    for title, rows, label in ((f"target forward, {target} ({loaded.device})", verify, "V"),
                               (f"draft step, {draft} ({loaded.device})", drafts, "W")):
        table = Table(title=f"{title}: median ms [IQR]", title_justify="left")
        table.add_column(label, justify="right")
        for context in context_list:
            table.add_column(f"L={context}", justify="right")
        for n in sorted({r.tokens for r in rows}):
            cells = {r.context: r for r in rows if r.tokens == n}
            table.add_row(str(n), *(f"{cells[c].median * 1e3:.1f} [{cells[c].iqr[0] * 1e3:.1f}-{cells[c].iqr[1] * 1e3:.1f}]"
                                    for c in context_list))
        out.print(table)
    if as_json:
        print(json.dumps({"target": target, "draft": draft, "device": str(loaded.device), "threads": _threads(),
                          "simspec_version": __version__, "samples": [r.to_dict() for r in verify + drafts]}))


@app.command("train-draft")
def train_draft(
    kind: str = typer.Option("eagle", help="eagle: EAGLE-style feature head (reads the target's hidden "
                             "states); lm: a small standalone Llama sharing the target's tokenizer."),
    target: str = typer.Option("smollm2-135m-instruct", help=TARGET_HELP),
    data: str = typer.Option("sharegpt,code,self", help="Teacher text: sharegpt (train split), code (Python "
                             "stdlib), self (the target's own greedy continuations of train prompts)."),
    tokens: int = typer.Option(200_000, min=256, help="Teacher tokens in total, split evenly between sources."),
    epochs: int = typer.Option(4, min=1, help="Passes over the teacher corpus."),
    draft_vocab: int = typer.Option(8192, "--draft-vocab", min=16, help="Reduced draft vocabulary (most frequent target tokens)."),
    unroll: int = typer.Option(2, min=1, max=4, help="eagle: training passes feeding the head's own features back (1 = EAGLE-1)."),
    feature_weight: float = typer.Option(1.0, "--feature-weight", min=0.0, help="eagle: weight of the feature-regression loss (0 = token loss only)."),
    hidden: int = typer.Option(256, min=16, help="lm: hidden size."),
    layers: int = typer.Option(2, min=1, help="lm: decoder layers."),
    lr: float = typer.Option(1e-3, help="Peak learning rate (AdamW, warm-up then cosine)."),
    seed: int = typer.Option(0, help="Seed for data order, initialisation and sampling."),
    out_path: Optional[str] = typer.Option(None, "--out", help="Output directory (default real/drafters/KIND; refused if it exists, unless --force)."),
    force: bool = typer.Option(False, help="Replace an existing --out."),
    threads: Optional[int] = typer.Option(None, help="torch CPU threads (default: all cores)."),
    as_json: bool = typer.Option(False, "--json", help="End stdout with one JSON line of the results."),
) -> None:
    """Train a drafter for TARGET on teacher data it labels itself; resumable (a stopped run
    continues from OUT.partial/), deterministic from --seed."""
    from pathlib import Path

    import torch

    from simspec.cache import atomic_directory
    from simspec.distill.corpus import CorpusSpec, build_corpus
    from simspec.engine.draft_lm import DraftLMShape
    from simspec.engine.models import load_model
    from simspec.distill.trainer import EagleTrainConfig, EagleTrainer, LMTrainConfig, LMTrainer

    if kind not in ("eagle", "lm"):
        raise SimspecError(f"--kind must be eagle or lm, got {kind!r}")
    out_dir = Path(out_path or f"real/drafters/{kind}")
    if out_dir.exists() and not force:
        raise SimspecError(f"{out_dir} exists: choose another --out or pass --force")
    spec = CorpusSpec(tuple(s.strip() for s in data.split(",") if s.strip()), tokens, seed=seed)
    heldout = CorpusSpec(("self",), max(4096, tokens // 20), seed=seed + 1, split="heldout")
    _set_threads(threads)
    torch.manual_seed(seed)
    loaded = load_model(target)
    started = time.perf_counter()
    with _progress() as progress:
        tracker = _bars(progress)

        corpus = build_corpus(loaded, spec, tracker)
        heldout_corpus = build_corpus(loaded, heldout, tracker)
        data_s = time.perf_counter() - started
        if kind == "eagle":
            trainer = EagleTrainer(loaded, corpus, EagleTrainConfig(
                draft_vocab=draft_vocab, epochs=epochs, lr=lr, unroll=unroll, feature_weight=feature_weight, seed=seed))
        else:
            shape = DraftLMShape(hidden=hidden, layers=layers, heads=max(1, hidden // 64),
                                 kv_heads=max(1, hidden // 128), intermediate=int(hidden * 2.75) // 16 * 16)
            trainer = LMTrainer(loaded, corpus, LMTrainConfig(draft_vocab=draft_vocab, epochs=epochs, lr=lr,
                                                              seed=seed, shape=shape))
        task = progress.add_task("training", total=trainer.total_steps)
        tick = lambda stats: progress.update(task, completed=stats["step"],  # noqa: E731
                                             description=f"training loss {stats['loss']:.3f}")
        train_started = time.perf_counter()
        trainer.train(out_dir.with_name(out_dir.name + ".partial") / "checkpoint.pt", tick)
        train_s = time.perf_counter() - train_started
    agreement = trainer.agreement(heldout_corpus)
    meta = {"kind": kind, "data": corpus.meta, "heldout": heldout_corpus.meta, "seed": seed,
            "heldout_agreement": agreement, "data_seconds": data_s, "train_seconds": train_s,
            "machine": _machine()}
    with atomic_directory(out_dir, replace=force) as tmp:
        trainer.save(tmp, meta)
    import shutil

    shutil.rmtree(out_dir.with_name(out_dir.name + ".partial"), ignore_errors=True)
    out.print(f"drafter written to {out_dir}: held-out top-1 {agreement['top1']:.3f}, top-10 "
              f"{agreement['top10']:.3f} on the target's own greedy text; draft vocabulary covers "
              f"{trainer.coverage():.1%} of its greedy tokens; data {data_s:.0f} s, training {train_s:.0f} s")
    if as_json:
        print(json.dumps({"drafter": str(out_dir), "kind": kind, "heldout_top1": agreement["top1"],
                          "heldout_top10": agreement["top10"], "coverage": trainer.coverage(),
                          "data_seconds": data_s, "train_seconds": train_s, "steps": trainer.step}))


ARCH_TARGETS = {"arch:llama-3.1-8b": "Llama-3.1-8B-class target (32 layers, hidden 4096, GQA 32/8, vocab 128,256) "
                                     "with an EAGLE-3-style one-layer draft (32k draft vocabulary)"}
GPU_NAMES = ("auto", "cpu", "a100", "h100", "h200", "a40", "l4", "rtx3090", "rtx4090", "v100")


@app.command()
def calibrate(
    gpu: str = typer.Option("auto", help="auto (the device present), cpu, or a GPU name: a100, h100, h200, a40, l4, "
                            "rtx3090, rtx4090, v100. A named GPU that torch does not see gets an ANALYTIC "
                            "roofline profile, marked as such everywhere."),
    target: str = typer.Option("smollm2-135m-instruct", help=TARGET_HELP + " Analytic only: arch:llama-3.1-8b."),
    draft: str = typer.Option("eagle", help=DRAFT_HELP),
    prompts: str = typer.Option("humaneval", help=PROMPTS_HELP),
    n_prompts: int = typer.Option(164, "--n-prompts", min=1, help="Prompts to record (first N; both splits, each "
                                  "trace remembers its split)."),
    max_new_tokens: int = typer.Option(128, "--max-new-tokens", min=2, help="Greedy tokens per prompt."),
    depth_max: int = typer.Option(12, "--depth-max", min=2, max=32, help="Tree levels recorded (root included)."),
    width: int = typer.Option(10, min=1, max=32, help="Beam width W of the recorded trees."),
    traces_from: Optional[str] = typer.Option(None, "--traces-from", help="Reuse traces (a traces folder or a "
                                              "profile with traces; same models) instead of recording them."),
    no_traces: bool = typer.Option(False, "--no-traces", help="Latency curves only."),
    traces_only: bool = typer.Option(False, "--traces-only", help="Record traces only, into --out (a traces folder "
                                     "that profiles then name with --traces-from). No timing: may share the machine."),
    check_prompts: int = typer.Option(4, "--check-prompts", min=0, help="Prompts for the replay check (live engine "
                                      "vs trace, per cycle)."),
    check_tokens: int = typer.Option(48, "--check-tokens", min=2, help="New tokens per replay-check run."),
    quick: bool = typer.Option(False, help="A small latency grid (tests, demo)."),
    out_path: Optional[str] = typer.Option(None, "--out", help="Profile folder (default calibration/<gpu>-<draft>)."),
    force: bool = typer.Option(False, help="Replace an existing --out."),
    threads: Optional[int] = typer.Option(None, help="torch CPU threads (default: all cores)."),
    seed: int = typer.Option(0, help="Seed (context token ids of the latency runs)."),
    as_json: bool = typer.Option(False, "--json", help="End stdout with one JSON line of the results."),
) -> None:
    """Measure latency curves (or model them for an absent GPU), fit the cost model, and record
    draft-tree traces into one profile folder: everything the simulator needs."""
    from pathlib import Path

    import torch

    from simspec.cache import atomic_directory
    from simspec.data import load_prompts
    from simspec.measure.curves import (
        CurveGrid,
        analytic_curves,
        bookkeeping_latency,
        device_name,
        drafter_architecture,
        measure_curves,
    )
    from simspec.sim.analytic import LLAMA31_8B, LLAMA31_8B_DRAFT, Architecture, device_spec
    from simspec.sim.profile import write_profile

    gpu = gpu.lower()
    if gpu not in GPU_NAMES:
        raise SimspecError(f"unknown --gpu {gpu!r}: choose one of {', '.join(GPU_NAMES)}")
    default_out = f"calibration/traces-{Path(prompts).stem}-{Path(draft).name}" if traces_only else \
        f"calibration/{gpu}-{Path(draft).name}"
    out_dir = Path(out_path or default_out)
    if out_dir.exists() and not force:
        raise SimspecError(f"{out_dir} exists: choose another --out or pass --force")
    cuda = torch.cuda.is_available()
    present = cuda and gpu not in ("cpu", "auto") and gpu.replace("rtx", "") in torch.cuda.get_device_name(0).lower().replace(" ", "")
    kind = "measured" if gpu in ("cpu", "auto") or present else "analytic"
    if target in ARCH_TARGETS and kind == "measured":
        raise SimspecError(f"--target {target} is an architecture without weights: use it with an absent --gpu "
                           f"(analytic), e.g. --gpu h100")
    source = _traces_source(traces_from, target, draft) if traces_from else None
    if traces_only and (no_traces or source or target in ARCH_TARGETS):
        raise SimspecError("--traces-only records traces: it needs real models and no --no-traces / --traces-from")
    grid = CurveGrid.quick() if quick else CurveGrid()
    _set_threads(threads)
    torch.manual_seed(seed)
    if kind == "analytic":
        spec = device_spec(gpu)
        err.print(f"[yellow]warning:[/] no {gpu.upper()} here: building an ANALYTIC roofline profile from public "
                  "device specs and the model architecture. It is a model, not a measurement.")
    run_device = "cuda" if cuda and kind == "measured" and gpu != "cpu" else "cpu"
    models_needed = target not in ARCH_TARGETS
    loaded = drafter = None
    if models_needed:
        from simspec.engine.load import load_drafter
        from simspec.engine.models import load_model

        with err.status(f"loading {target} and draft {draft}"):
            loaded = load_model(target, device=run_device)
            drafter = load_drafter(draft, loaded)
    chosen = []
    if models_needed and not (no_traces or source):
        chosen = load_prompts(prompts, n=n_prompts)
    started = time.perf_counter()
    with _progress() as progress:
        bar = _bars(progress)
        if traces_only:
            samples, device_label = [], "none (traces only)"
        elif kind == "measured":
            samples = measure_curves(loaded, drafter, grid, bar("latency curves", grid.count()))
            device_label = device_name(loaded)
        else:
            book = bookkeeping_latency(grid.book_sizes, grid.book_depths, grid.book_width, grid.repeats,
                                       bar("host bookkeeping", len(grid.book_sizes) * len(grid.book_depths)))
            if models_needed:
                target_arch = Architecture.from_config(loaded.model.config)
                draft_arch = drafter_architecture(drafter)
            else:
                target_arch, draft_arch = LLAMA31_8B, LLAMA31_8B_DRAFT
            samples = analytic_curves(spec, target_arch, draft_arch, grid, book)
            device_label = f"{gpu.upper()} (analytic: {spec.tflops:g} TFLOP/s, {spec.bandwidth_gbs:g} GB/s)"
        curves_s = time.perf_counter() - started
        policy_seconds = {}
        if samples:  # the policies run on this host whatever the accelerator: time their decisions here
            from simspec.policies.timing import policy_latency
            from simspec.sim.costmodel import CostModel
            from simspec.sim.evaluate import timing_baselines
            from simspec.sim.profile import points_of

            w, d = (source[1]["width"], source[1]["depth_max"]) if source else (width, depth_max)
            families = timing_baselines(CostModel(points_of(samples)), w, d)
            policy_seconds = policy_latency(families, w, d, grid.repeats * 5)
            from simspec.train.radar import RADAR_TIMING_KEY, radar_call_seconds

            # RADAR's training charges this (stored so that one seed gives one policy).
            policy_seconds[RADAR_TIMING_KEY] = radar_call_seconds(w, d, 60)
        traces_meta, record_s, checks = None, 0.0, []
        if chosen:
            traces, record_s, checks = _record_traces(loaded, drafter, chosen, prompts, target, draft, max_new_tokens,
                                                      depth_max, width, check_prompts, min(check_tokens, max_new_tokens),
                                                      seed, bar)
    meta = {
        "simspec_version": __version__, "kind": kind, "gpu": gpu, "device": device_label,
        "target": target, "draft": draft if models_needed else "eagle3-style one-layer draft",
        "architecture": {"target": (Architecture.from_config(loaded.model.config) if loaded else LLAMA31_8B).to_dict(),
                         "draft": (drafter_architecture(drafter) if drafter else LLAMA31_8B_DRAFT).to_dict()},
        "dtype": str(next(loaded.model.parameters()).dtype) if loaded else "bfloat16 (modelled)",
        "threads": torch.get_num_threads(), "seed": seed, "grid": "quick" if quick else "full",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": _machine(),
        "seconds": {"curves": round(curves_s, 1), "traces": round(record_s, 1)},
        "replay_check": [c.to_dict() for c in checks],
        "policy_seconds": policy_seconds,
    }
    if target in ARCH_TARGETS:
        meta["target_description"] = ARCH_TARGETS[target]
    if traces_only:
        from simspec.sim.traces import save_traces

        with atomic_directory(out_dir, replace=force) as tmp:
            traces.meta["replay_check"] = meta["replay_check"]
            traces.meta["machine"] = meta["machine"]
            save_traces(tmp, traces)
        _report_traces(out_dir, traces, record_s, checks, as_json)
        return
    with atomic_directory(out_dir, replace=force) as tmp:
        if chosen:
            from simspec.sim.traces import save_traces

            content = save_traces(tmp / "traces", traces)
            traces_meta = {"path": "traces", "content_hash": content, "positions": traces.positions,
                           "n_prompts": traces.n_prompts, "prompts": prompts, "depth_max": depth_max, "width": width}
        elif source:
            source_dir, ref = source
            traces_meta = {**ref, "path": os.path.relpath(source_dir, out_dir.resolve())}
        meta["traces"] = traces_meta
        profile = write_profile(tmp, meta, samples)
    fit = profile.meta["fit_error"]
    verdict = ""
    if checks:
        total = sum(c.cycles for c in checks)
        same = sum(c.matches for c in checks)
        verdict = f"; replay check: {same}/{total} cycles' accepted lengths equal the live engine's"
    out.print(f"profile written to {out_dir} ({kind}, {device_label}): cost model held-out relative error median "
              f"{fit['median']:.1%}, p90 {fit['p90']:.1%}"
              + (f"; {traces_meta['n_prompts']} prompts, {traces_meta['positions']} positions" if traces_meta else "")
              + verdict)
    if as_json:
        print(json.dumps({"profile": str(out_dir), "device": device_label, "kind": kind,
                          "fit_error_median": fit["median"], "fit_error_p90": fit["p90"],
                          "prompts": traces_meta["n_prompts"] if traces_meta else 0,
                          "positions": traces_meta["positions"] if traces_meta else 0,
                          "seconds": meta["seconds"], "replay_check": meta["replay_check"]}))


def _traces_source(path: str, target: str, draft: str):
    """(folder, reference) of existing traces: a traces folder, or the traces a profile names."""
    from pathlib import Path

    from simspec.sim.profile import load_profile
    from simspec.sim.traces import load_traces

    folder = Path(path)
    if (folder / "profile.json").is_file():
        profile = load_profile(folder)
        if not profile.meta.get("traces"):
            raise SimspecError(f"--traces-from {path}: that profile has latency curves only, no traces")
        folder = profile.traces_dir
    traces = load_traces(folder)
    meta = traces.meta
    if meta.get("target") != target or meta.get("draft") != draft:
        raise SimspecError(f"--traces-from {path} holds traces of {meta.get('target')} + {meta.get('draft')}, "
                           f"not {target} + {draft}: pass the matching --target/--draft or record new traces")
    ref = {"content_hash": meta["content_hash"], "positions": traces.positions, "n_prompts": traces.n_prompts,
           "prompts": meta.get("prompts"), "depth_max": traces.depth_max, "width": traces.width}
    return folder.resolve(), ref


def _report_traces(out_dir, traces, record_s: float, checks, as_json: bool) -> None:
    size_mb = sum(f.stat().st_size for f in out_dir.iterdir()) / 1e6
    same, total = sum(c.matches for c in checks), sum(c.cycles for c in checks)
    out.print(f"traces written to {out_dir}: {traces.n_prompts} prompts, {traces.positions} positions, "
              f"{size_mb:.1f} MB, recorded in {record_s:.0f} s"
              + (f"; replay check: {same}/{total} cycles' accepted lengths equal the live engine's" if checks else ""))
    if as_json:
        print(json.dumps({"traces": str(out_dir), "prompts": traces.n_prompts, "positions": traces.positions,
                          "megabytes": size_mb, "record_seconds": record_s,
                          "replay_check": [c.to_dict() for c in checks]}))


def _record_traces(loaded, drafter, chosen, prompts, target, draft, max_new_tokens, depth_max, width, check_prompts,
                   check_tokens, seed, bar):
    from simspec.data import render_chat
    from simspec.engine.speculative import SpeculativeEngine
    from simspec.measure.recorder import RecordSpec, TraceRecorder, replay_check
    from simspec.sim.traces import assemble

    recorder = TraceRecorder(loaded, drafter, RecordSpec(depth_max, width, max_new_tokens))
    engine = SpeculativeEngine(loaded, drafter)
    ids = [render_chat(loaded.tokenizer, p.text) for p in chosen]
    for one in ids:
        engine.check_length(one, max_new_tokens + depth_max)
    started = time.perf_counter()
    recorded = recorder.record_all(ids, bar)
    record_s = time.perf_counter() - started
    meta = {"target": target, "draft": draft, "prompts": prompts, "prompt_ids": [p.id for p in chosen],
            "splits": [p.split for p in chosen], "max_new_tokens": max_new_tokens, "depth_max": depth_max,
            "width": width, "seed": seed, "simspec_version": __version__,
            "near_tie_cuts": int(sum(r.near_tie_cut for r in recorded)), "record_seconds": round(record_s, 1)}
    traces = assemble(recorded, [len(i) for i in ids], meta)
    checks = []
    if check_prompts:
        k = min(check_prompts, len(ids))
        configs = [(3, 8), (6, 16), (8, 60), (depth_max, 240)]
        tick = bar("replay check (live engine)", k * len(configs))
        checks = replay_check(engine, traces, ids[:k], configs, check_tokens, tick)
    return traces, record_s, checks


@app.command()
def recalibrate(
    profile: str = typer.Option(..., help="A measured profile with traces (calibration/NAME)."),
    n_prompts: int = typer.Option(8, "--n-prompts", min=1, help="Train-split prompts of the profile's dataset to run "
                                  "(never held-out ones)."),
    max_new_tokens: int = typer.Option(48, "--max-new-tokens", min=4, help="New tokens per run."),
    out_path: Optional[str] = typer.Option(None, "--out", help="The refitted profile (default: PROFILE-insitu "
                                           "beside it)."),
    force: bool = typer.Option(False, help="Replace an existing --out."),
    threads: Optional[int] = typer.Option(None, help="torch CPU threads (default: the profile's)."),
    as_json: bool = typer.Option(False, "--json", help="End stdout with one JSON line of the results."),
) -> None:
    """Refit a measured profile's latency curves in situ: run plain greedy decoding and a ladder
    of static trees (V = 2..128) on the live engine, on train prompts, and scale each curve to the
    engine's own cycle timings (per verified size for verify and bookkeeping). Calibration's tight
    loops miss what a forward costs inside the decoding loop; this profile predicts the real
    engine. Takes ~5 minutes on a 2-core CPU at the defaults. Writes a new profile that names the
    one it refits."""
    from simspec.measure.insitu import RecalibrateRequest, recalibrate as run_recalibrate

    request = RecalibrateRequest(profile, out_path, n_prompts, max_new_tokens, force)
    checked = request.check()
    _set_threads(threads or checked[0].meta.get("threads"))
    with _progress() as progress:
        summary = run_recalibrate(request, _bars(progress), err.status, checked)
    ratios = ", ".join(f"{op} {r:.2f}" for op, r in summary["live_over_profile"].items())
    out.print(f"{summary['profile']}: {summary['base']} refitted to {summary['cycles']:,} live cycles on "
              f"{summary['prompts']} train prompts in {summary['seconds']:.0f} s; live / profile before: {ratios}")
    if as_json:
        print(json.dumps(summary))


@app.command()
def validate(
    simulated: bool = typer.Option(False, "--simulated", help="Replay the profile's traces (fast, no models)."),
    real: bool = typer.Option(False, "--real", help="Run every method on the real engine, interleaved with plain "
                              "greedy decoding, next to the simulator's prediction for the same prompts."),
    profile: str = typer.Option(..., help="A profile folder with traces (calibration/NAME)."),
    baselines: str = typer.Option(",".join(("eagle3", "grid", "ddd", "svip", "gammatune", "analytic", "fsm",
                                            "cachefsm", "qlearn")),
                                  help="Comma-separated: eagle3, grid, ddd, svip, gammatune, analytic, fsm, cachefsm, "
                                  "qlearn, static:D,V. Tunable ones are tuned on the profile's train split."),
    policies: str = typer.Option("", help="Comma-separated learned policy folders (policies/NAME), scored beside "
                                 "the baselines; each is charged its measured decision time."),
    split: str = typer.Option("heldout", help="Prompts scored: heldout, train or all."),
    max_new_tokens: Optional[int] = typer.Option(None, "--max-new-tokens", min=2,
                                                 help="Token budget per prompt (simulated default: everything "
                                                 "recorded; real default: 48)."),
    prompts: str = typer.Option("humaneval", help="--real: " + PROMPTS_HELP),
    n_prompts: int = typer.Option(40, "--n-prompts", min=1, help="--real: prompts to run (first N of the split)."),
    repeats: int = typer.Option(1, min=1, help="--real: passes over the prompts (per-prompt speedup: median)."),
    out_dir: Optional[str] = typer.Option(None, "--out", help="--real: run folder (default "
                                          "real/validate-PROFILE-PROMPTS)."),
    force: bool = typer.Option(False, help="--real: replace an existing --out."),
    threads: Optional[int] = typer.Option(None, help="--real: torch threads (default: the profile's)."),
    as_json: bool = typer.Option(False, "--json", help="End stdout with one JSON line of the results."),
) -> None:
    """Score baselines and learned policies against plain greedy decoding. --simulated: replay
    the profile's held-out traces, next to the hindsight oracle (seconds). --real: run them on
    the real models and report real and simulated speedups side by side, paired tests against
    EAGLE-3's default tree and the grid best, latency drift, and a lossless check; writes
    real/RUN/ (report.json, report.md, figures)."""
    if real == simulated:
        raise SimspecError("choose one of --simulated (replay, seconds) or --real (the real engine)")
    names = [n.strip() for n in baselines.split(",") if n.strip()]
    paths = [p.strip() for p in policies.split(",") if p.strip()]
    if real:
        from simspec.measure.validate import ValidateRequest

        request = ValidateRequest(profile, tuple(names), tuple(paths), prompts, split, n_prompts,
                                  max_new_tokens or 48, repeats, out_dir, force)
        _validate_real(request, threads, as_json)
        return
    _validate_simulated(profile, names, paths, split, max_new_tokens, as_json)


def _validate_simulated(profile: str, names: list[str], paths: list[str], split: str, max_new_tokens: Optional[int],
                        as_json: bool) -> None:
    from simspec.sim.evaluate import evaluate, method_set, split_traces
    from simspec.sim.profile import load_profile

    if split not in ("heldout", "train", "all"):
        raise SimspecError(f"--split must be heldout, train or all, got {split!r}")
    loaded = load_profile(profile)
    started = time.perf_counter()
    with err.status("loading traces"):
        traces = loaded.traces()
    train = split_traces(traces, "train")
    scored = split_traces(traces, split)
    with err.status("tuning baselines on the train split and replaying"):
        methods, charged, notes = method_set(names, paths, loaded, train, max_new_tokens)
        for note in notes:
            err.print(f"[yellow]warning:[/] {note}")
        rows, oracle_row, cycles_per_s = evaluate(scored, loaded.cost, methods, max_new_tokens, charged)
    seconds = time.perf_counter() - started
    if loaded.kind == "analytic":
        err.print("[yellow]warning:[/] ANALYTIC profile: these times come from a roofline model, not a measurement")
    table = Table(title=f"validate --simulated: {loaded.label}; {scored.n_prompts} {split} prompts, "
                        f"{'all recorded' if max_new_tokens is None else max_new_tokens} tokens", title_justify="left")
    for col in ("method", "speedup (median)", "IQR", "mean", "tau", "cycles", "draft calls", "share of oracle"):
        table.add_column(col, justify="right" if col != "method" else "left")
    for r in rows + [oracle_row]:
        table.add_row(r.name, f"{r.speedup_median:.3f}", f"{r.speedup_q25:.2f}-{r.speedup_q75:.2f}",
                      f"{r.speedup_mean:.3f}", f"{r.tau:.2f}", f"{r.cycles:.1f}", f"{r.draft_calls:.1f}",
                      f"{r.share_of_oracle:.1%}")
    out.print(table)
    out.print(f"replayed {len(rows)} methods + oracle on {scored.positions} positions in {seconds:.1f} s "
              f"(replay: {cycles_per_s:,.0f} cycles/s)")
    if as_json:
        print(json.dumps({
            "profile": profile, "split": split, "kind": loaded.kind, "device": loaded.meta["device"],
            "prompts": scored.n_prompts, "max_new_tokens": max_new_tokens,
            "traces_hash": traces.meta["content_hash"], "profile_hash": loaded.meta["inputs_hash"],
            "rows": [{"method": r.name, "speedup": r.speedup_median, "tau": r.tau, "oracle_share": r.share_of_oracle,
                      "draft_calls": r.draft_calls, **r.to_dict()} for r in rows],
            "oracle": oracle_row.to_dict(), "cycles_per_s": cycles_per_s, "seconds": seconds}))


def _validate_real(request, threads: Optional[int], as_json: bool) -> None:
    from simspec.measure.validate import validate_real
    from simspec.report.validation import summary_line

    checked = request.check()
    _set_threads(threads or checked[0].meta.get("threads"))
    with _progress() as progress:
        report, run_dir = validate_real(request, _bars(progress), err.status, checked)
    for note in report["warnings"]:
        err.print(f"[yellow]warning:[/] {note}")
    _print_validation_table(report)
    if report["drift"]["advice"]:
        err.print(f"[yellow]warning:[/] {report['drift']['advice']}")
    for row in report["rows"]:
        for d in row["divergences"]:
            err.print(f"[yellow]{row['method']} on {d['prompt']}: differs from greedy at token {d['position']}, "
                      f"top-2 logit gap {d['top2_gap']:.2e}{' (near-tie)' if d['near_tie'] else ' (BUG)'}[/]")
    out.print(f"report written to {run_dir}/ (report.json, report.md, figures) in {report['seconds']:.0f} s")
    if as_json:
        print(json.dumps(summary_line(report, str(run_dir))))


def _print_validation_table(report: dict) -> None:
    rank = report["rank_agreement"]
    table = Table(title=f"validate --real: {report['profile']['name']} ({report['device']}); {report['n_prompts']} "
                        f"{report['prompts']} ({report['split']}) prompts, {report['max_new_tokens']} new tokens",
                  title_justify="left")
    for col in ("method", "real (median)", "IQR", "sim", "sim error", "sim drift-corr.", "tau real/sim", "draft calls", "vs EAGLE-3",
                "p", "vs grid", "p", "lossless"):
        table.add_column(col, justify="left" if col == "method" else "right")
    pct = lambda v: "-" if v is None else f"{v:+.1%}"  # noqa: E731
    pv = lambda v: "-" if v is None else f"{v:.1e}"  # noqa: E731
    for r in sorted(report["rows"], key=lambda r: -r["speedup_real"]):
        table.add_row(r["method"], f"{r['speedup_real']:.3f}", f"{r['speedup_real_q25']:.2f}-{r['speedup_real_q75']:.2f}",
                      f"{r['speedup_sim']:.3f}", f"{r['rel_error']:+.1%}",
                      f"{r['speedup_sim_drift_corrected']:.3f} ({r['rel_error_drift_corrected']:+.1%})",
                      f"{r['tau']:.2f}/{r['tau_sim']:.2f}",
                      f"{r['draft_calls']:.1f}", pct(r.get("gain_vs_eagle3")), pv(r.get("p_vs_eagle3")),
                      pct(r.get("gain_vs_grid")), pv(r.get("p_vs_grid")),
                      "yes" if r["exact_match"] else ("near-tie" if r["lossless"] else "NO"))
    out.print(table)
    drift = ", ".join(f"{op} {ratio:.2f}" for op, ratio in report["drift"]["ratios"].items())
    out.print(f"simulator: mean |error| {report['mean_abs_rel_error']:.1%}, max {report['max_abs_rel_error']:.1%}, "
              f"rank agreement (Spearman) {'n/a' if rank is None else f'{rank:.3f}'}; drift-corrected: mean "
              f"{report['drift_corrected']['mean_abs_rel_error']:.1%}, max {report['drift_corrected']['max_abs_rel_error']:.1%}; "
              f"drift (live / profile): {drift}")



@app.command()
def train(
    simulated: bool = typer.Option(False, "--simulated", help="Train against the profile's replay (the only mode)."),
    profile: str = typer.Option(..., help="A profile folder with traces (calibration/NAME)."),
    algo: str = typer.Option(..., help="ltd (depth + size PPO, co-adapted), resps (cached tree budget, PPO) or "
                             "radar (LSTM continue/stop, offline REINFORCE)."),
    preset: str = typer.Option("paper", help="paper: the seed's networks, hyper-parameters and step counts; "
                               "fast: the same networks with about a tenth of the steps (minutes)."),
    reward: str = typer.Option("throughput", help="throughput (tokens per second of each cycle, LTD's), "
                               "acceptance (tokens per cycle, the proxy) or time (seconds saved over greedy)."),
    variant: str = typer.Option("standard", help="Re-SpS only: standard or maxent (entropy coefficient 0.1)."),
    seed: int = typer.Option(0, help="Seeds the networks, the environments and the sampling: same seed, same policy."),
    out_dir: Optional[str] = typer.Option(None, "--out", help="Policy folder (default policies/ALGO-PROFILE[-PRESET])."),
    force: bool = typer.Option(False, help="Replace an existing policy folder."),
    precision: str = typer.Option("auto", help="PPO's hidden layers: fp32, or bf16 (autocast; weights, heads, "
                                  "losses, Adam and the exported policy stay fp32). auto: bf16 for ltd where the "
                                  "CPU has native bf16 (twice as fast), else fp32."),
    threads: Optional[int] = typer.Option(None, help="Torch threads (default: every core)."),
    as_json: bool = typer.Option(False, "--json", help="End stdout with one JSON line of the results."),
) -> None:
    """Train a tree policy in the simulator, in minutes on a CPU. Learns on the profile's
    training prompts (a fifth of them held back to pick the best checkpoint), measures the
    policy's decision time here, scores it on the held-out prompts against EAGLE-3's default
    tree, the best static tree and the hindsight oracle, and writes policies/NAME/: the
    exported inference networks, the SB3/torch checkpoints, metadata, training.csv and
    TensorBoard logs (tb/)."""
    from simspec.train.run import TrainRequest, total_work, train_policy

    if not simulated:
        raise SimspecError("training runs in the simulator: pass --simulated")
    request = TrainRequest(profile, algo, preset, reward, seed, out_dir, variant, force, precision)
    request.check()
    _set_threads(threads)
    with _progress() as bar:
        task = bar.add_task(f"train {algo} ({preset})", total=total_work(request))
        summary = train_policy(request, lambda n: bar.advance(task, n))
    if preset == "fast":
        out.print("preset fast: the paper's networks with about a tenth of its steps; train with --preset paper "
                  "for the reported results")
    out.print(f"{summary['policy']}: {algo} ({preset}, reward {reward}, seed {seed}, "
              f"{request.resolved_precision()}) trained in "
              f"{summary['train_seconds']:.0f} s, {summary['env_steps']:,} environment steps "
              f"({summary['env_steps'] / summary['train_seconds']:,.0f}/s)")
    out.print(f"held-out speedup (simulated, median): {summary['heldout_speedup']:.3f} | grid best "
              f"{summary['grid_best_speedup']:.3f} | EAGLE-3 default {summary['eagle3_speedup']:.3f} | "
              f"share of the oracle {summary['oracle_share']:.1%}")
    if as_json:
        print(json.dumps(summary))


@app.command()
def demo(
    out_dir: str = typer.Option("demo", "--out", help="Folder for everything the demo makes."),
    algos: str = typer.Option("ltd,radar", help="Policies to train (preset fast): ltd, radar, resps."),
    n_prompts: int = typer.Option(8, "--n-prompts", min=1, help="Held-out HumanEval prompts of the real validation."),
    max_new_tokens: int = typer.Option(32, "--max-new-tokens", min=4, help="New tokens per prompt in the real validation."),
    force: bool = typer.Option(False, help="Replace an existing --out."),
) -> None:
    """The whole loop on the shipped defaults, in about 10 minutes on a 2-core CPU: a small
    calibration of this machine (quick latency grid; the shipped HumanEval draft-tree traces,
    which do not depend on the hardware), `fast` training of LTD and RADAR against it, a short
    real validation (the learned policies, EAGLE-3's default tree, the grid best and
    GammaTune, interleaved with plain greedy decoding), the figures, and a summary. Each step
    is an ordinary simspec command, printed before it runs."""
    import shutil
    from pathlib import Path

    from simspec.shipped import locate, missing_hint

    root = Path(out_dir)
    chosen = [a.strip() for a in algos.split(",") if a.strip()]
    bad = [a for a in chosen if a not in ("ltd", "radar", "resps")]
    if bad or not chosen:
        raise SimspecError(f"--algos takes ltd, radar and/or resps, got {algos!r}")
    if root.exists() and not force:
        raise SimspecError(f"{root} exists: choose another --out or pass --force")
    traces = locate("calibration/traces-humaneval-eagle")
    if not (traces / "traces.json").is_file():
        raise SimspecError(f"the shipped traces are missing: {missing_hint()}")
    shutil.rmtree(root, ignore_errors=True)
    profile, figures = root / "profile", root / "figures"
    policies = [root / "policies" / a for a in chosen]
    steps = [["calibrate", "--gpu", "cpu", "--quick", "--traces-from", str(traces), "--out", str(profile)],
             ["plot", "curves", "--profile", str(profile), "--out", str(figures)]]
    for algo, policy in zip(chosen, policies):
        steps += [["train", "--simulated", "--profile", str(profile), "--algo", algo, "--preset", "fast",
                   "--out", str(policy)],
                  ["plot", "training", "--policy", str(policy), "--out", str(figures)]]
    steps.append(["validate", "--real", "--profile", str(profile), "--baselines", "eagle3,grid,gammatune",
                  "--policies", ",".join(map(str, policies)), "--n-prompts", str(n_prompts),
                  "--max-new-tokens", str(max_new_tokens), "--out", str(root / "validate")])
    started = time.perf_counter()
    try:
        for i, step in enumerate(steps, 1):
            err.rule(f"demo step {i}/{len(steps)}: simspec {' '.join(step)}", align="left")
            app(args=step, standalone_mode=False)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)  # no half-made demo folder
        raise
    _print_demo_summary(root, profile, policies, time.perf_counter() - started)


def _print_demo_summary(root, profile_dir, policies, seconds: float) -> None:
    from simspec.policies.artifact import read_policy_meta
    from simspec.report.validation import read_report
    from simspec.sim.profile import load_profile

    profile = load_profile(profile_dir)
    report = read_report(root / "validate")
    err.rule("demo summary", align="left")
    fit = profile.meta["fit_error"]
    out.print(f"calibrated {profile.meta['device']} in {profile.meta['seconds']['curves']:.0f} s: cost model held-out "
              f"error median {fit['median']:.1%}")
    for path in policies:
        _, meta = read_policy_meta(path)
        held = meta.get("heldout") or {}
        out.print(f"trained {meta['algo']} (fast) in {meta.get('train_seconds', float('nan')):.0f} s: simulated held-out "
                  f"speedup {held.get('speedup', float('nan')):.3f} (grid best {held.get('grid_best_speedup', float('nan')):.3f})")
    table = Table(title=f"real validation: {report['n_prompts']} held-out HumanEval prompts, "
                        f"{report['max_new_tokens']} new tokens", title_justify="left")
    for col in ("method", "real speedup", "simulated", "error", "lossless"):
        table.add_column(col, justify="left" if col == "method" else "right")
    for r in sorted(report["rows"], key=lambda r: -r["speedup_real"]):
        table.add_row(r["method"], f"{r['speedup_real']:.3f}", f"{r['speedup_sim']:.3f}", f"{r['rel_error']:+.1%}",
                      "yes" if r["exact_match"] else ("near-tie" if r["lossless"] else "NO"))
    out.print(table)
    if report["drift"]["advice"]:
        out.print(f"note: {report['drift']['advice']}")
    out.print(f"demo finished in {seconds / 60:.1f} min; everything is in {root}/ (profile/, policies/, validate/ with "
              "report.md and figures, figures/)")


@app.command("bench-sim")
def bench_sim(
    profile: str = typer.Option(..., help="A profile folder with traces."),
    copies: int = typer.Option(200, min=1, help="Copies of every trace prompt replayed at once."),
    depth: int = typer.Option(8, min=1, help="Static tree depth D."),
    size: int = typer.Option(60, min=1, help="Static verified tokens V."),
    repeats: int = typer.Option(3, min=1, help="Timed replays (median reported)."),
    as_json: bool = typer.Option(False, "--json", help="End stdout with one JSON line of the results."),
) -> None:
    """Replay throughput of the simulator: cycles per second for a static policy over
    COPIES copies of the profile's traces, on one core."""
    from simspec.policies import StaticPolicy
    from simspec.sim.evaluate import replay_throughput
    from simspec.sim.profile import load_profile

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    loaded = load_profile(profile)
    traces = loaded.traces()
    runs = [replay_throughput(traces, loaded.cost, StaticPolicy(depth, traces.width, size), copies)
            for _ in range(repeats)]
    rates = sorted(c / s for c, s in runs)
    median = rates[len(rates) // 2]
    out.print(f"replay of static D={depth} V={size} over {copies} x {traces.n_prompts} prompts: "
              f"{runs[0][0]:,} cycles per replay, median {median:,.0f} cycles/s "
              f"(range {rates[0]:,.0f}-{rates[-1]:,.0f}, {repeats} repeats)")
    if as_json:
        print(json.dumps({"profile": profile, "copies": copies, "depth": depth, "size": size,
                          "cycles": runs[0][0], "cycles_per_s": median, "all_cycles_per_s": rates}))

plot_app = typer.Typer(no_args_is_help=True, help="Draw figures from profiles and runs into figures/.")
app.add_typer(plot_app, name="plot")


@plot_app.command("curves")
def plot_curves_command(
    profile: str = typer.Option(..., help="A profile folder (calibration/NAME)."),
    out_dir: str = typer.Option("figures", "--out", help="Folder for the figure."),
) -> None:
    """Draft time vs depth and verify time vs V (LTD Figure 2, left): the profile's
    measurements with the fitted cost model drawn over them."""
    from pathlib import Path

    from simspec.report.plots import plot_curves
    from simspec.sim.profile import load_profile

    loaded = load_profile(profile)
    path = plot_curves(loaded, Path(out_dir))
    if loaded.kind == "analytic":
        err.print("[yellow]warning:[/] this profile is ANALYTIC (a roofline model, not a measurement); the figure says so")
    out.print(f"figure written to {path}")



@plot_app.command("surface")
def plot_surface_command(
    profile: str = typer.Option(..., help="A profile folder with traces."),
    split: str = typer.Option("heldout", help="Prompts: heldout, train or all."),
    max_new_tokens: Optional[int] = typer.Option(None, "--max-new-tokens", min=2),
    out_dir: str = typer.Option("figures", "--out", help="Folder for the figure."),
) -> None:
    """Simulated speedup of every static (D, V) tree at the traces' width: the throughput
    surface a policy moves on, with the grid best and the oracle marked."""
    from pathlib import Path

    from simspec.report.plots import plot_surface
    from simspec.sim.evaluate import split_traces, static_surface
    from simspec.sim.oracle import oracle
    from simspec.sim.profile import load_profile

    loaded = load_profile(profile)
    traces = split_traces(loaded.traces(), split)
    surface = {k: float(np.mean(v.speedup)) for k, v in static_surface(traces, loaded.cost, max_new_tokens).items()}
    best = float(np.mean(oracle(traces, loaded.cost, max_new_tokens).speedup))
    path = plot_surface(loaded, surface, best, Path(out_dir), split)
    out.print(f"figure written to {path}")

@plot_app.command("training")
def plot_training_command(
    policy: str = typer.Option(..., help="A policy folder (policies/NAME)."),
    out_dir: str = typer.Option("figures", "--out", help="Folder for the figure."),
) -> None:
    """Training curves of a policy (LTD Figure 3 style): reward per step and validation
    speedup against environment steps, phase by phase, from its training.csv."""
    from pathlib import Path

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
    path = plot_training(directory.name, meta, rows, Path(out_dir))
    out.print(f"figure written to {path}")


@plot_app.command("validation")
def plot_validation_command(
    report: str = typer.Option(..., help="A validate --real run folder (real/RUN) or its report.json."),
    out_dir: Optional[str] = typer.Option(None, "--out", help="Folder for the figures (default: the run folder)."),
    method: Optional[str] = typer.Option(None, help="Also draw this method's action map (learned policies' are "
                                         "always drawn)."),
) -> None:
    """Redraw a real validation's figures from its report.json: simulated vs real speedup per
    method, the time breakdown (LTD Fig. 2 right), and action maps (LTD Fig. 6)."""
    from pathlib import Path

    from simspec.report.plots import plot_action_map, plot_validation
    from simspec.report.validation import read_report

    path = Path(report)
    loaded = read_report(path)
    folder = Path(out_dir) if out_dir else (path if path.is_dir() else path.parent)
    paths = plot_validation(loaded, folder)
    if method:
        try:
            paths.append(plot_action_map(loaded, method, folder))
        except KeyError:
            names = ", ".join(r["method"] for r in loaded["rows"])
            raise SimspecError(f"--method {method!r} is not in that report: choose one of {names}") from None
    out.print("figures written: " + ", ".join(str(p) for p in paths))


@app.command("drafter-card")
def drafter_card(
    draft: str = typer.Option("eagle", help="A shipped drafter name or a simspec drafter directory."),
    target: str = typer.Option("smollm2-135m-instruct", help=TARGET_HELP),
    n_prompts: int = typer.Option(8, "--n-prompts", min=1, help="Held-out prompts per source for acceptance."),
    max_new_tokens: int = typer.Option(64, "--max-new-tokens", min=1),
    threads: Optional[int] = typer.Option(None, help="torch CPU threads (default: all cores)."),
) -> None:
    """Measure a trained drafter (draft-step latency vs W, acceptance per depth on held-out
    HumanEval and ShareGPT prompts) and write its model card (README.md + measured.json)."""
    from pathlib import Path

    from simspec.engine.load import load_drafter
    from simspec.shipped import shipped_drafter
    from simspec.distill.card import count_parameters, measure_card, write_card
    from simspec.engine.models import load_model

    _set_threads(threads)
    loaded = load_model(target)
    drafter = load_drafter(draft, loaded)
    directory = shipped_drafter(draft) or Path(draft)
    provenance = directory / "simspec.json"  # a draft LM keeps its provenance beside the HF config
    config = json.loads((provenance if provenance.is_file() else directory / "config.json").read_text())
    if hasattr(drafter, "head"):
        config["parameters"] = count_parameters(drafter.head)
        description = ("EAGLE-style feature drafter: [target feature ; next-token embedding] -> linear -> one "
                       "Llama decoder layer with its own KV cache -> the target's LM head over a reduced draft "
                       "vocabulary (ids mapped back to the target's). Only the mixer, the layer and the id map are "
                       "stored; embeddings and head rows come from the target at load time.")
    else:
        model_config = drafter.model.config
        config["parameters"] = count_parameters(drafter.model)
        config.setdefault("config", {})["draft_vocab"] = len(drafter.draft_vocab) if drafter.draft_vocab is not None else None
        description = (f"Standalone draft LM: a {model_config.num_hidden_layers}-layer Llama, hidden "
                       f"{model_config.hidden_size}, {model_config.num_attention_heads} heads "
                       f"({model_config.num_key_value_heads} KV), sharing the target's tokenizer; tied embeddings "
                       "initialised from the target's embedding projected on its principal directions, then "
                       "distilled on the target's greedy tokens. A plain Hugging Face model directory; children "
                       "are scored over a reduced output vocabulary (draft_vocab.safetensors).")
    with err.status("measuring latency and acceptance"):
        measured = measure_card(loaded, drafter, n_prompts, max_new_tokens)
    title = f"simspec drafter `{directory.name}` for {config.get('target')}"
    write_card(directory, title, description, config, measured)
    out.print(f"model card written to {directory / 'README.md'}")


def _machine() -> str:
    import platform

    import torch

    return f"{platform.machine()} {os.cpu_count()} cores, torch {torch.__version__}, {torch.get_num_threads()} threads"


def _threads() -> int:
    import torch

    return torch.get_num_threads()


def _split(split: str) -> str:
    if split not in ("heldout", "train"):
        raise SimspecError(f"--split must be heldout, train or all, got {split!r}")
    return split


def _print_bench_table(title: str, rows: list[dict], best: dict) -> None:
    table = Table(title=title, title_justify="left")
    for col in ("D", "W", "V", "speedup (median)", "IQR", "per pass", "tau", "draft", "verify", "bookkeeping", "lossless"):
        table.add_column(col, justify="right")
    for r in rows:
        s = r["time_shares"]
        mark = " *" if r is best else ""
        table.add_row(
            str(r["depth"]), str(r["width"]), str(r["size"]), f"{r['speedup']:.3f}{mark}",
            f"{r['speedup_q25']:.2f}-{r['speedup_q75']:.2f}", "/".join(f"{m:.2f}" for m in r["repeat_medians"]),
            f"{r['tau']:.2f}",
            f"{s['draft']:.0%}", f"{s['verify']:.0%}", f"{s['bookkeeping']:.1%}",
            "yes" if r["exact_match"] else ("near-tie" if r["lossless"] else "NO"),
        )
    out.print(table)
    out.print(f"best: D={best['depth']} W={best['width']} V={best['size']} speedup {best['speedup']:.3f}x (* above)")


def main(argv: Optional[list[str]] = None) -> None:
    """Console entry point: user errors become one line on stderr and exit status 2."""
    try:
        app(args=argv, standalone_mode=False)
    except SimspecError as exc:
        err.print(f"simspec: error: {exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("simspec: interrupted", markup=False)
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:  # click's usage errors and friends
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        if isinstance(exc, click.exceptions.Abort):
            sys.exit(1)
        raise


if __name__ == "__main__":
    main()
