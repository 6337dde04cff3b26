"""Batches measured for real: the prompt set as one queue through B rows, plainly and with every
method, interleaved pass by pass in rotated order. A method's speedup is plain decoding's time
for the set / its own, at the same B; outputs are checked against plain decoding's, or at T > 0
by their PIT under the target (each pass with its own seeds, the same for every method)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from simspec.engine.lossless import divergence_record
from simspec.engine.records import BatchRun
from simspec.engine.speculative import SpeculativeEngine
from simspec.measure.interleave import Verdict
from simspec.measure.tree_grid import TreeConfig, config_row
from simspec.policies.base import BatchPolicy


@dataclass
class MethodBatches(Verdict):
    """One method's batch runs, one per pass, beside plain decoding's of the same pass."""

    runs: list[BatchRun]
    ratios: list[float]  # per pass: the method's tokens/s over plain decoding's
    divergences: list[dict]  # the first pass's outputs against plain decoding's (``divergence_record``)
    pit: list[float] | None = None  # T > 0: every output token's PIT, all passes

    @property
    def sampled(self) -> bool:
        return self.pit is not None

    @property
    def speedup(self) -> float:
        """The median over passes, or at T > 0 the mean (each pass samples other text)."""
        return float(np.mean(self.ratios) if self.sampled else np.median(self.ratios))

    @property
    def cycles(self) -> float:
        return float(np.mean([r.cycles for r in self.runs]))

    @property
    def tokens_per_s(self) -> float:
        return float(np.median([r.tokens_per_s for r in self.runs]))


def pass_seeds(engine: SpeculativeEngine, n: int, rep: int) -> list[int] | None:
    """At T > 0 the seeds of pass ``rep``'s queue of ``n`` prompts, for every method: seed + rep * n + prompt."""
    return None if engine.sampling.greedy else [engine.sampling.seed + rep * n + p for p in range(n)]


def divergences(engine: SpeculativeEngine, prompt_ids: list[tuple[str, list[int]]], run: BatchRun,
                plain: BatchRun) -> list[dict]:
    """Every prompt of ``run`` whose output differs from plain decoding's (``divergence_record``)."""
    found = (divergence_record(engine.target, pid, ids, got.tokens, want.tokens)
             for (pid, ids), got, want in zip(prompt_ids, run.generations, plain.generations))
    return [d for d in found if d is not None]


def interleaved(engine: SpeculativeEngine, prompt_ids: list[tuple[str, list[int]]], policies: list[BatchPolicy],
                max_new_tokens: int, repeats: int, tick: Callable[..., None],
                between: Callable[[], None] | None = None) -> tuple[list[BatchRun], list[MethodBatches]]:
    """Plain decoding's runs (one per pass) and every policy's, interleaved; ``tick(n)`` after each
    run, then ``between()`` (a co-timed refit's next run)."""
    from simspec.engine.lossless import output_pit

    prompts = [ids for _, ids in prompt_ids]
    methods: list[BatchPolicy | None] = [None, *policies]
    runs: list[list[BatchRun]] = [[] for _ in methods]
    for rep in range(repeats):
        seeds = pass_seeds(engine, len(prompts), rep)
        for m in np.roll(np.arange(len(methods)), -rep):
            runs[m].append(engine.decode(prompts, methods[m], max_new_tokens, seeds))
            tick(len(prompts))
            if between is not None:
                between()
    plain, out = runs[0], []
    pit_rng = np.random.default_rng(engine.sampling.seed)
    for method_runs in runs[1:]:
        ratios = [r.tokens_per_s / p.tokens_per_s for p, r in zip(plain, method_runs)]
        if engine.sampling.greedy:
            out.append(MethodBatches(method_runs, ratios, divergences(engine, prompt_ids, method_runs[0], plain[0])))
            continue
        pit = [u for run in method_runs for ids, got in zip(prompts, run.generations)
               for u in output_pit(engine.target, ids, got.tokens, engine.sampling, pit_rng).tolist()]
        out.append(MethodBatches(method_runs, ratios, [], pit))
    return plain, out


def bench_batch(engine: SpeculativeEngine, prompt_ids: list[tuple[str, list[int]]], configs: list[TreeConfig],
                max_new_tokens: int, repeats: int, tick: Callable[..., None]) -> tuple[list[dict], float]:
    """Every config's row (``tree_grid.config_row``) and plain decoding's tokens/s (median over passes)."""
    plain, measured = interleaved(engine, prompt_ids, [c.policy() for c in configs], max_new_tokens, repeats, tick)
    rows = []
    for config, method in zip(configs, measured):
        q25, q75 = np.percentile(method.ratios, [25, 75])
        rows.append(config_row(config, method, (q25, method.speedup, q75), [float(x) for x in method.ratios],
                               float(np.mean([g.tau for g in method.runs[0].generations])), method.tokens_per_s,
                               [r.time_shares() for r in method.runs], method.divergences))
    return rows, float(np.median([r.tokens_per_s for r in plain]))
