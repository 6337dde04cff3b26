"""Batches measured for real: the prompt set as one queue through B rows (``simspec.engine.speculative``),
plainly and with every method, interleaved pass by pass (each pass rotates the order, so that a
drifting machine spreads over every method alike). A method's speedup is plain decoding's time
for the whole set / the method's, at the same batch size: the throughput ratio a server sees.
Every output is checked against plain decoding's (greedy), or at T > 0 by the PIT of every output
token under the target's distribution (KS against uniform): each pass samples its queue with its
own seeds, the same for plain decoding and every method. ``bench-engine --batch-size B`` (static trees,
here) and ``validate --real --batch-size B`` (``validate_batch``) both run ``interleaved``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from simspec.engine.lossless import divergence_record
from simspec.engine.records import BatchRun
from simspec.engine.speculative import SpeculativeEngine
from simspec.measure.tree_grid import TreeConfig
from simspec.policies.base import BatchPolicy, StaticPolicy


@dataclass
class MethodBatches:
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
        """The median over passes (greedy: the passes repeat one computation), or at T > 0 the mean
        (each pass samples other text: the speedup is a random variable)."""
        return float(np.mean(self.ratios) if self.sampled else np.median(self.ratios))

    @property
    def cycles(self) -> float:
        return float(np.mean([r.cycles for r in self.runs]))

    @property
    def tokens_per_s(self) -> float:
        return float(np.median([r.tokens_per_s for r in self.runs]))

    @property
    def pit_p(self) -> float | None:
        from simspec.engine.lossless import pit_p_value

        return pit_p_value(self.pit) if self.sampled else None

    @property
    def lossless(self) -> bool:
        """Equal to plain greedy decoding or split only at near-ties; at T > 0 the PIT not rejected."""
        from simspec.engine.lossless import PIT_ALARM

        return self.pit_p >= PIT_ALARM if self.sampled else all(d["near_tie"] for d in self.divergences)


def pass_seeds(engine: SpeculativeEngine, n: int, rep: int) -> list[int] | None:
    """At T > 0 the seeds of pass ``rep``'s queue of ``n`` prompts (every method and plain decoding
    sample with them; the scored traces are recorded with them): seed + rep * n + prompt."""
    return None if engine.sampling.greedy else [engine.sampling.seed + rep * n + p for p in range(n)]


def divergences(engine: SpeculativeEngine, prompt_ids: list[tuple[str, list[int]]], run: BatchRun,
                plain: BatchRun) -> list[dict]:
    """Every prompt of ``run`` whose output differs from plain decoding's (``divergence_record``:
    where, and whether at a near-tie)."""
    found = (divergence_record(engine.target, pid, ids, got.tokens, want.tokens)
             for (pid, ids), got, want in zip(prompt_ids, run.generations, plain.generations))
    return [d for d in found if d is not None]


def interleaved(engine: SpeculativeEngine, prompt_ids: list[tuple[str, list[int]]], policies: list[BatchPolicy],
                max_new_tokens: int, repeats: int, tick: Callable[..., None]
                ) -> tuple[list[BatchRun], list[MethodBatches]]:
    """Plain decoding's runs (one per pass) and every policy's, interleaved; ``tick(n)`` after each
    run of the n prompts. At T > 0 pass ``rep`` samples with ``pass_seeds``."""
    from simspec.engine.lossless import output_pit

    prompts = [ids for _, ids in prompt_ids]
    methods: list[BatchPolicy | None] = [None, *policies]
    runs: list[list[BatchRun]] = [[] for _ in methods]
    for rep in range(repeats):
        seeds = pass_seeds(engine, len(prompts), rep)
        for m in np.roll(np.arange(len(methods)), -rep):
            runs[m].append(engine.decode(prompts, methods[m], max_new_tokens, seeds))
            tick(len(prompts))
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
    """Every config's row (``bench.config_summary``'s fields) and plain decoding's tokens/s over
    the whole batch (its median over passes)."""
    policies = [StaticPolicy(c.depth, c.width, c.size) for c in configs]
    plain, measured = interleaved(engine, prompt_ids, policies, max_new_tokens, repeats, tick)
    rows = []
    for config, method in zip(configs, measured):
        q25, q75 = np.percentile(method.ratios, [25, 75])
        shares = [r.time_shares() for r in method.runs]
        rows.append({
            "depth": config.depth, "width": config.width, "size": config.size,
            "speedup": method.speedup, "speedup_q25": float(q25), "speedup_q75": float(q75),
            "repeat_medians": [float(x) for x in method.ratios],
            "tau": float(np.mean([g.tau for g in method.runs[0].generations])),
            "tokens_per_s": method.tokens_per_s,
            "lossless": method.lossless, "exact_match": None if method.sampled else not method.divergences,
            "pit_p": method.pit_p, "pit_tokens": len(method.pit or ()),
            "time_shares": {k: float(np.mean([s[k] for s in shares])) for k in shares[0]},
            "divergences": method.divergences,
        })
    return rows, float(np.median([r.tokens_per_s for r in plain]))
