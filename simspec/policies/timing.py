"""Decision time: what one cycle of a policy's decisions costs, through the batch methods the
engine calls; the simulator charges it per cycle."""

from __future__ import annotations

import time

import numpy as np

from simspec.blas import one_blas_thread
from simspec.policies.base import frontier_scores, overrides, sorted_levels
from simspec.stats import robust_median


def policy_latency(policies: dict, width: int, depth: int, repeats: int, seed: int = 0) -> dict[str, float]:
    """Seconds one cycle of decisions costs each policy, called as the engine calls it for one row, on
    synthetic scores of the real shapes. Each cycle starts with cold caches, as in the engine after
    the models' forwards (warm-cache timings underrate them: docs/validation.md#decision-time)."""
    rng = np.random.default_rng(seed)
    levels = [np.sort(-rng.exponential(2.0, width if i == 0 else width * width)).astype(np.float32)
              for i in range(depth - 1)]
    nodes = np.concatenate([[0.0], *levels]).astype(np.float32)
    frontiers = [frontier_scores(level, width)[None] for level in levels]
    tree = sorted_levels(nodes, width, depth - 1)[None]
    scratch = np.zeros(8 << 20, dtype=np.float32)  # 32 MB: meant to exceed a core's last-level cache share
    row, at = np.zeros(1, dtype=np.int64), np.array([256])
    out = {}
    for name, policy in policies.items():
        policy.batch_size = 1
        policy.reset_batch(1)
        asks, sizes = overrides(policy, "keep_drafting_batch"), overrides(policy, "choose_size_batch")
        extra = {"hits": np.array([1])} if policy.reads_cache else {}

        def cycle() -> None:
            planned, size = policy.plan_batch(row, at)
            policy.children_batch(row)
            if asks:
                for level in range(2, depth):
                    policy.keep_drafting_batch(row, np.array([level]), frontiers[level - 2], planned)
            if sizes:
                size = policy.choose_size_batch(row, np.array([depth]), tree, size)
            policy.observe_batch(row, np.array([depth]), np.minimum(size, len(nodes)), np.array([2]), **extra)

        # A policy that decides once per ``hold`` cycles (Re-SpS) is timed over whole intervals:
        # a median of single cycles would see only the cheap ones in between.
        block = max(1, int(getattr(policy, "hold", 1)))
        samples = []
        with one_blas_thread():  # as inside the engine
            for _ in range(3 + max(10, repeats // block)):  # about ``repeats`` cycles in all
                seconds = 0.0
                for _ in range(block):
                    scratch += 1.0  # evict: in the engine a model forward runs between two cycles
                    started = time.perf_counter()
                    cycle()
                    seconds += time.perf_counter() - started
                samples.append(seconds / block)
        out[name] = robust_median(np.array(samples[3:]))
    return out


def timing_depths(depth_max: int) -> tuple[int, ...]:
    """The depths ``policy_latency_by_depth`` times at: the shallowest tree, the middle, the deepest
    (between them a rule's cost runs close to a line: docs/simulator.md#decision-time)."""
    return tuple(sorted({2, max(2, (2 + depth_max) // 2), max(2, depth_max)}))


def policy_latency_by_depth(policies: dict, width: int, depth_max: int, repeats: int,
                            seed: int = 0) -> dict[str, dict[str, float]]:
    """``policy_latency`` at each of ``timing_depths(depth_max)``: {name: {"depth": seconds}}. The
    shallower depths take a third of the ``repeats``: each timed cycle first evicts the caches, which
    costs more than most decisions, and they weigh less in a cycle's time."""
    depths = timing_depths(depth_max)
    timed = {d: policy_latency(policies, width, d, repeats if d == depths[-1] else max(1, repeats // 3), seed)
             for d in depths}
    return {name: {str(d): timed[d][name] for d in timed} for name in policies}
