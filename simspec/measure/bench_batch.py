"""``bench-engine --batch-size B`` with B > 1: the prompt set decodes as one queue through B
rows (``simspec.engine.batch``), plainly and with every static tree, interleaved pass by pass
(each pass rotates the order, so that a drifting machine spreads over every method alike). A
config's speedup is plain decoding's time for the whole set / the config's, at the same batch
size: the throughput ratio a server sees. Every output is checked against plain decoding's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict

import numpy as np

from simspec.engine.batch import BatchEngine, BatchRun
from simspec.engine.lossless import compare
from simspec.measure.bench import TreeConfig
from simspec.policies.base import StaticPolicy


def bench_batch(engine: BatchEngine, prompt_ids: list[tuple[str, list[int]]], configs: list[TreeConfig],
                max_new_tokens: int, repeats: int, tick: Callable[..., None]) -> tuple[list[dict], float]:
    """Every config's row (``bench.config_summary``'s fields) and plain decoding's tokens/s over
    the whole batch (its median over passes)."""
    prompts = [ids for _, ids in prompt_ids]
    methods: list[StaticPolicy | None] = [None] + [StaticPolicy(c.depth, c.width, c.size) for c in configs]
    runs: list[list[BatchRun]] = [[] for _ in methods]
    for rep in range(repeats):
        order = np.roll(np.arange(len(methods)), -rep)
        for m in order:
            policy = methods[m]
            runs[m].append(engine.plain(prompts, max_new_tokens) if policy is None
                           else engine.generate(prompts, policy, max_new_tokens))
            tick(len(prompts))
    plain = runs[0]
    rows = []
    for config, config_runs in zip(configs, runs[1:]):
        ratios = [r.tokens_per_s / p.tokens_per_s for p, r in zip(plain, config_runs)]
        q25, median, q75 = np.percentile(ratios, [25, 50, 75])
        divergences = []
        for (pid, ids), got, want in zip(prompt_ids, config_runs[0].generations, plain[0].generations):
            found = compare(engine.target, ids, got.tokens, want.tokens)
            if found is not None:
                divergences.append({"prompt": pid, **asdict(found), "near_tie": found.near_tie})
        shares = [r.time_shares() for r in config_runs]
        rows.append({
            "depth": config.depth, "width": config.width, "size": config.size,
            "speedup": float(median), "speedup_q25": float(q25), "speedup_q75": float(q75),
            "repeat_medians": [float(x) for x in ratios],
            "tau": float(np.mean([g.tau for g in config_runs[0].generations])),
            "tokens_per_s": float(np.median([r.tokens_per_s for r in config_runs])),
            "lossless": all(d["near_tie"] for d in divergences), "exact_match": not divergences,
            "pit_p": None, "pit_tokens": 0,
            "time_shares": {k: float(np.mean([s[k] for s in shares])) for k in shares[0]},
            "divergences": divergences,
        })
    return rows, float(np.median([r.tokens_per_s for r in plain]))
