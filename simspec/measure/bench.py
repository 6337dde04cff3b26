"""``bench-engine``: static tree configs against plain greedy decoding on the same prompts; and
the interleaved run loop that ``validate --real`` shares.

Every prompt runs plain greedy decoding and every config back to back, in an order rotated
from prompt to prompt, so that machine drift (thermal, other processes) hits all methods
alike; a config's speedup is the per-prompt ratio greedy time / speculative time, and the
table reports the median over prompts with the inter-quartile range.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterator, Sequence

import numpy as np

from simspec.policies.base import Policy, StaticPolicy, tree_capacity
from simspec.engine.speculative import Generation, SpeculativeEngine
from simspec.engine.lossless import Divergence, compare


@dataclass(frozen=True)
class TreeConfig:
    depth: int
    width: int
    size: int

    @property
    def label(self) -> str:
        return f"D={self.depth} W={self.width} V={self.size}"


def config_grid(depths: Sequence[int], widths: Sequence[int], sizes: Sequence[int]) -> list[TreeConfig]:
    """The grid's distinct trees: V is capped at the tree's node count, so (D=3, W=1, V=60)
    and (D=3, W=1, V=8) are the same tree and appear once (with the effective V)."""
    seen: dict[tuple[int, int, int], TreeConfig] = {}
    for depth, width, size in itertools.product(depths, widths, sizes):
        width = 1 if depth == 1 else width  # nothing is drafted: the width is moot
        key = (depth, width, min(size, tree_capacity(depth, width)))
        seen.setdefault(key, TreeConfig(*key))
    return list(seen.values())


@dataclass
class ConfigResult:
    config: TreeConfig
    speedups: list[float] = field(default_factory=list)  # per prompt (median over repeats)
    by_repeat: list[list[float]] = field(default_factory=list)  # [repeat][prompt]
    taus: list[float] = field(default_factory=list)
    shares: list[dict[str, float]] = field(default_factory=list)
    divergences: list[tuple[str, Divergence]] = field(default_factory=list)

    @property
    def lossless(self) -> bool:
        """Equal to greedy everywhere, or split only at float-order near-ties."""
        return all(d.near_tie for _, d in self.divergences)

    def summary(self) -> dict:
        q25, median, q75 = np.percentile(self.speedups, [25, 50, 75])
        shares = {k: float(np.mean([s[k] for s in self.shares])) for k in self.shares[0]}
        return {
            **asdict(self.config),
            "speedup": float(median),
            "speedup_q25": float(q25),
            "speedup_q75": float(q75),
            "repeat_medians": [float(np.median(r)) for r in self.by_repeat],
            "tau": float(np.mean(self.taus)),
            "lossless": self.lossless,
            "exact_match": not self.divergences,
            "time_shares": shares,
            "divergences": [{"prompt": p, **asdict(d)} for p, d in self.divergences],
        }


def interleaved(
    engine: SpeculativeEngine,
    prompts: Sequence[tuple[str, list[int]]],
    policies: Sequence[Policy],
    max_new_tokens: int,
    advance: Callable[[], None] = lambda: None,
    repeats: int = 1,
) -> Iterator[tuple[int, int, Generation, list[Generation]]]:
    """Plain greedy decoding and every policy on every prompt, back to back in an order rotated
    from prompt to prompt (and pass to pass), so that drift over time hits every method alike.
    Yields (pass, prompt index, greedy generation, one generation per policy); ``advance``
    ticks per run."""
    # Warm-up: first calls pay for allocator growth and lazy initialisation.
    first_ids = prompts[0][1]
    engine.greedy(first_ids, min(8, max_new_tokens))
    for policy in policies:
        engine.generate(first_ids, policy, min(8, max_new_tokens))
    for rep in range(repeats):
        for p, (_, ids) in enumerate(prompts):
            runs: dict[int, Generation] = {}
            for slot in np.roll(np.arange(len(policies) + 1), -(p + rep)):  # slot 0: greedy
                runs[slot] = engine.greedy(ids, max_new_tokens) if slot == 0 else engine.generate(
                    ids, policies[slot - 1], max_new_tokens
                )
                advance()
            yield rep, p, runs[0], [runs[i + 1] for i in range(len(policies))]


def run_bench(
    engine: SpeculativeEngine,
    prompts: Sequence[tuple[str, list[int]]],
    configs: Sequence[TreeConfig],
    max_new_tokens: int,
    advance: Callable[[], None] = lambda: None,
    repeats: int = 1,
) -> list[ConfigResult]:
    """Greedy and every config on every prompt, interleaved, ``repeats`` passes over the
    prompt set; a prompt's speedup is the median over passes."""
    results = [ConfigResult(c) for c in configs]
    policies = [StaticPolicy(c.depth, c.width, c.size) for c in configs]
    for result in results:
        result.by_repeat = [[] for _ in range(repeats)]
    for rep, p, greedy, runs in interleaved(engine, prompts, policies, max_new_tokens, advance, repeats):
        prompt_id, ids = prompts[p]
        for result, spec in zip(results, runs):
            result.by_repeat[rep].append(greedy.total_s / spec.total_s)
            if rep == 0:
                result.taus.append(spec.tau)
                result.shares.append(spec.time_shares())
                divergence = compare(engine.target, ids, spec.tokens, greedy.tokens)
                if divergence is not None:
                    result.divergences.append((prompt_id, divergence))
    for result in results:
        result.speedups = np.median(np.array(result.by_repeat), axis=0).tolist()
    return results
