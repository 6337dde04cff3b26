"""The ``simspec`` command: the only place that parses flags or prints for a person."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Optional

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
    "Draft: 'eagle' (the shipped EAGLE-style drafter), a simspec drafter directory, "
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
    device: str = typer.Option("auto", help="auto, cpu or cuda."),
    threads: Optional[int] = typer.Option(None, help="torch CPU threads (default: all cores)."),
    as_json: bool = typer.Option(False, "--json", help="End stdout with one JSON line of the results."),
) -> None:
    """Real engine: every static (D, W, V) tree vs plain greedy decoding on the same prompts,
    interleaved; median speedup, acceptance length tau, time shares, and a lossless check."""
    from simspec.data import load_prompts, render_chat
    from simspec.real.bench import config_grid, run_bench
    from simspec.real.drafters import load_drafter
    from simspec.real.engine import SpeculativeEngine
    from simspec.real.models import load_model

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
        task = progress.add_task("bench-engine", total=len(prompt_ids) * (len(configs) + 1))
        results = run_bench(engine, prompt_ids, configs, max_new_tokens, lambda: progress.advance(task))

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
        keep = ("depth", "width", "size", "speedup", "speedup_q25", "speedup_q75", "tau", "lossless", "exact_match")
        slim = [{k: r[k] for k in keep} | {"time_shares": r["time_shares"], "divergences": r["divergences"]}
                for r in rows]
        print(json.dumps({
            "target": target, "draft": draft, "prompts": prompts, "split": split, "n_prompts": len(prompt_ids),
            "prompt_ids": [pid for pid, _ in prompt_ids],
            "max_new_tokens": max_new_tokens, "device": str(loaded.device), "simspec_version": __version__,
            "configs": slim, "best": {k: best[k] for k in keep},
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
    from simspec.real.drafters import load_drafter
    from simspec.real.models import load_model
    from simspec.real.profiler import draft_latency, target_latency

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
    kind: str = typer.Option("eagle", help="eagle: EAGLE-style feature head (reads the target's hidden states)."),
    target: str = typer.Option("smollm2-135m-instruct", help=TARGET_HELP),
    data: str = typer.Option("sharegpt,code,self", help="Teacher text: sharegpt (train split), code (Python "
                             "stdlib), self (the target's own greedy continuations of train prompts)."),
    tokens: int = typer.Option(200_000, min=256, help="Teacher tokens in total, split evenly between sources."),
    epochs: int = typer.Option(4, min=1, help="Passes over the teacher corpus."),
    draft_vocab: int = typer.Option(8192, "--draft-vocab", min=16, help="Reduced draft vocabulary (most frequent target tokens)."),
    unroll: int = typer.Option(2, min=1, max=4, help="Training passes feeding the head's own features back (1 = EAGLE-1)."),
    lr: float = typer.Option(1e-3, help="Peak learning rate (AdamW, warm-up then cosine)."),
    seed: int = typer.Option(0, help="Seed for data order, initialisation and sampling."),
    out_path: str = typer.Option("real/drafters/eagle", "--out", help="Output directory (refused if it exists, unless --force)."),
    force: bool = typer.Option(False, help="Replace an existing --out."),
    threads: Optional[int] = typer.Option(None, help="torch CPU threads (default: all cores)."),
    as_json: bool = typer.Option(False, "--json", help="End stdout with one JSON line of the results."),
) -> None:
    """Train a drafter for TARGET on teacher data it labels itself; resumable (a stopped run
    continues from OUT.partial/), deterministic from --seed."""
    from pathlib import Path

    import torch

    from simspec.cache import atomic_directory
    from simspec.real.distill import CorpusSpec, build_corpus
    from simspec.real.models import load_model
    from simspec.real.train_draft import EagleTrainConfig, EagleTrainer

    if kind != "eagle":
        raise SimspecError(f"--kind {kind!r} is not available yet: use --kind eagle")
    out_dir = Path(out_path)
    if out_dir.exists() and not force:
        raise SimspecError(f"{out_dir} exists: choose another --out or pass --force")
    spec = CorpusSpec(tuple(s.strip() for s in data.split(",") if s.strip()), tokens, seed=seed)
    heldout = CorpusSpec(("self",), max(4096, tokens // 20), seed=seed + 1, split="heldout")
    _set_threads(threads)
    torch.manual_seed(seed)
    loaded = load_model(target)
    started = time.perf_counter()
    with _progress() as progress:
        def tracker(description: str, total: int):
            task = progress.add_task(description, total=total)
            return lambda n=1: progress.advance(task, n)

        corpus = build_corpus(loaded, spec, tracker)
        heldout_corpus = build_corpus(loaded, heldout, tracker)
        data_s = time.perf_counter() - started
        trainer = EagleTrainer(loaded, corpus, EagleTrainConfig(
            draft_vocab=draft_vocab, epochs=epochs, lr=lr, unroll=unroll, seed=seed))
        task = progress.add_task("training", total=trainer.total_steps)
        tick = lambda stats: progress.update(task, completed=stats["step"],  # noqa: E731
                                             description=f"training loss {stats['loss']:.3f}")
        train_started = time.perf_counter()
        trainer.train(out_dir.with_name(out_dir.name + ".partial") / "checkpoint.pt", tick)
        train_s = time.perf_counter() - train_started
    agreement = trainer.agreement(heldout_corpus)
    meta = {"kind": "eagle", "data": corpus.meta, "heldout": heldout_corpus.meta, "seed": seed,
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

    from simspec.real.drafters import SHIPPED_DRAFTERS, load_drafter
    from simspec.real.model_card import count_parameters, measure_card, write_card
    from simspec.real.models import load_model

    _set_threads(threads)
    loaded = load_model(target)
    drafter = load_drafter(draft, loaded)
    directory = SHIPPED_DRAFTERS / draft if (SHIPPED_DRAFTERS / draft).is_dir() else Path(draft)
    config = json.loads((directory / "config.json").read_text())
    config["parameters"] = count_parameters(drafter.head) if hasattr(drafter, "head") else None
    with err.status("measuring latency and acceptance"):
        measured = measure_card(loaded, drafter, n_prompts, max_new_tokens)
    title = f"simspec drafter `{directory.name}` for {config.get('target')}"
    description = ("EAGLE-style feature drafter: [target feature ; next-token embedding] -> linear -> one "
                   "Llama decoder layer with its own KV cache -> the target's LM head over a reduced draft "
                   "vocabulary (ids mapped back to the target's). Only the mixer, the layer and the id map are "
                   "stored; embeddings and head rows come from the target at load time.")
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
    for col in ("D", "W", "V", "speedup (median)", "IQR", "tau", "draft", "verify", "bookkeeping", "lossless"):
        table.add_column(col, justify="right")
    for r in rows:
        s = r["time_shares"]
        mark = " *" if r is best else ""
        table.add_row(
            str(r["depth"]), str(r["width"]), str(r["size"]), f"{r['speedup']:.3f}{mark}",
            f"{r['speedup_q25']:.2f}-{r['speedup_q75']:.2f}", f"{r['tau']:.2f}",
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
