"""``bench-engine``: static tree configs against plain decoding on the same prompts, interleaved."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from simspec import __version__, flags
from simspec.engine.formats import draft_help
from simspec.errors import SimspecError
from simspec.flags import opt
from simspec.measure import Bar
from simspec.measure.interleave import MethodRuns
from simspec.measure.tree_grid import TreeConfig, config_grid, config_row

BENCH_SCHEMA, BENCH_VERSION = "simspec-bench-engine", 1


@dataclass(frozen=True, kw_only=True)
class BenchRequest:
    target: str = flags.target()
    draft: str = flags.draft(draft_help)
    prompts: str = flags.prompts()
    split: str = flags.split()
    n_prompts: int = flags.n_prompts(3)
    offset: int = opt(0, "Skip this many prompts of the split first (to run a long grid in chunks).", min=0)
    max_new_tokens: int = flags.max_new_tokens(48)
    depths: tuple[int, ...] = opt((1, 3, 5), "Tree depths D (levels, root included; D-1 draft steps).",
                                  parse=flags.sizes)
    widths: tuple[int, ...] = flags.tree_widths((1, 4), parse=flags.sizes)
    sizes: tuple[int, ...] = flags.tree_sizes((6, 12), parse=flags.sizes)
    repeats: int = flags.repeats(1)
    device: str = flags.device()
    dtype: str = flags.dtype()
    temperature: float = flags.temperature(0.0)
    top_p: float = flags.top_p()
    seed: int = flags.seed()
    batch_size: int = flags.batch_size()
    runtime: str = flags.runtime()

    def sampling(self):
        from simspec.engine.sampling import Sampling

        return Sampling(self.temperature, self.top_p, self.seed)

    def check(self) -> tuple[list[TreeConfig], list]:
        """The configs and the prompts, before any model loads."""
        from simspec.data import load_prompts
        from simspec.engine.models import resolve_dtype
        from simspec.engine.runtime import check_runtime
        from simspec.sim.evaluate import check_split

        resolve_dtype(self.dtype)
        check_runtime(self.runtime)
        if self.device not in ("auto", "cpu", "cuda"):
            raise SimspecError(f"--device must be auto, cpu or cuda, got {self.device!r}")
        configs = config_grid(self.depths, self.widths, self.sizes)
        split = check_split(self.split)
        chosen = load_prompts(self.prompts, split=None if split == "all" else split,
                              n=self.offset + self.n_prompts)[self.offset:]
        if not chosen:
            raise SimspecError(f"--offset {self.offset} skips every prompt of {self.prompts} ({self.split})")
        return configs, chosen


def _tokens_per_s(times: list[list[tuple[float, int, float, int]]], side: int) -> float:
    """Tokens per second over every pass and prompt: plain decoding's (``side`` 0) or the method's (2)."""
    table = np.array(times, dtype=float).reshape(-1, 4)
    return float(table[:, side + 1].sum() / table[:, side].sum())


def config_summary(config: TreeConfig, runs: MethodRuns) -> dict:
    """One config's row of the ``--json`` line."""
    q25, median, q75 = np.percentile(runs.speedup, [25, 50, 75])
    return config_row(config, runs, (q25, median, q75), [float(np.median(r)) for r in runs.by_repeat],
                      float(np.mean(runs.taus)), _tokens_per_s(runs.times, 2), runs.shares,
                      [{k: v for k, v in d.items() if k != "near_tie"} for d in runs.divergences])


def bench_engine(request: BenchRequest, bar: Bar, status: Callable[[str], object],
                 checked: tuple[list[TreeConfig], list] | None = None) -> dict:
    """Runs plain decoding and every config on every prompt, interleaved; returns the ``--json`` summary."""
    import torch

    from simspec.data import render_chat
    from simspec.engine.load import load_pair
    from simspec.engine.models import resolve_device
    from simspec.engine.runtime import compiled_mode, compiled_seconds
    from simspec.engine.speculative import SpeculativeEngine
    from simspec.fingerprint import drafter_fingerprint
    from simspec.machine import device_model, machine
    from simspec.measure.interleave import run_methods

    configs, chosen = checked or request.check()
    loaded, drafter = load_pair(request.target, request.draft, resolve_device(request.device), status, request.dtype)
    engine = SpeculativeEngine(loaded, drafter, request.sampling(), runtime=request.runtime,
                               batch_size=request.batch_size)
    prompt_ids = [(p.id, render_chat(loaded.tokenizer, p.text)) for p in chosen]
    for _, ids in prompt_ids:
        engine.check_length(ids, request.max_new_tokens)
    if request.runtime == "compiled":
        with status("compiling the target's forwards for every shape the runs meet (once per process)"):
            engine.warm_up([len(ids) for _, ids in prompt_ids], request.max_new_tokens, [c.size for c in configs])
    tick = bar("bench-engine", request.repeats * len(prompt_ids) * (len(configs) + 1))
    if request.batch_size > 1:
        from simspec.measure.bench_batch import bench_batch

        rows, plain_tokens_per_s = bench_batch(engine, prompt_ids, configs, request.max_new_tokens, request.repeats,
                                               tick)
    else:
        runs = run_methods(engine, prompt_ids, [c.policy() for c in configs], request.max_new_tokens, tick,
                           request.repeats)
        rows = [config_summary(c, r) for c, r in zip(configs, runs)]
        plain_tokens_per_s = _tokens_per_s(runs[0].times, 0)
    keep = ("depth", "width", "size", "speedup", "speedup_q25", "speedup_q75", "repeat_medians", "tau",
            "tokens_per_s", "lossless", "exact_match", "pit_p", "pit_tokens")
    best = max(rows, key=lambda r: r["speedup"])
    # the prompts as the engine saw them (rendered token ids): a re-run on other prompts hashes differently
    prompts_hash = hashlib.sha256(json.dumps(prompt_ids).encode()).hexdigest()[:16]
    return {
        "schema": BENCH_SCHEMA, "schema_version": BENCH_VERSION, "simspec_version": __version__,
        "target": request.target, "draft": request.draft, "draft_fingerprint": drafter_fingerprint(request.draft),
        "dtype": request.dtype, "prompts": request.prompts, "split": request.split,
        "n_prompts": len(prompt_ids), "prompt_ids": [pid for pid, _ in prompt_ids], "prompts_hash": prompts_hash,
        "max_new_tokens": request.max_new_tokens, "repeats": request.repeats, "device": str(loaded.device),
        "batch_size": request.batch_size, "runtime": request.runtime, "compile_s": round(compiled_seconds(loaded), 1),
        "compile_mode": compiled_mode(loaded), "plain_tokens_per_s": plain_tokens_per_s,
        "device_model": device_model(str(loaded.device)), "machine": machine(str(loaded.device)),
        **request.sampling().describe(), "threads": torch.get_num_threads(),
        "configs": [{k: r[k] for k in keep} | {"time_shares": r["time_shares"], "divergences": r["divergences"]}
                    for r in rows],
        "best": {k: best[k] for k in keep},
    }
