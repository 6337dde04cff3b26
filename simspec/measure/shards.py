"""Trace recording sharded over Ray tasks (``calibrate --traces-only --ray``). A prompt's trace must
come out of a shard as out of one process, so shards are whole batches of the one-process
recording (a near-tie may split another way in another batch), and every task runs the driver's
thread count (float reductions in another order round differently). A task is retried
``MAX_RETRIES`` times, then the recording fails and nothing is published."""

from __future__ import annotations

import os
from collections.abc import Callable

MAX_RETRIES = 3
FAIL_ONCE_ENV = "SIMSPEC_RAY_FAIL_ONCE"  # tests: the first task to see this folder dies once


def shard_prompts(prompts: list[list[int]], workers: int, batch: int) -> list[list[int]]:
    """Prompt indices per shard: the one-process recording's batches, whole, each to the lightest shard."""
    from simspec.engine.greedy import length_batches

    groups = length_batches(prompts, batch)
    load = [0] * min(workers, len(groups))
    shards: list[list[list[int]]] = [[] for _ in load]
    for g in sorted(range(len(groups)), key=lambda g: -sum(len(prompts[i]) for i in groups[g])):
        k = min(range(len(load)), key=lambda k: (load[k], k))
        shards[k].append(g)
        load[k] += sum(len(prompts[i]) for i in groups[g])
    return [[i for g in sorted(shard) for i in groups[g]] for shard in shards if shard]


def _record_shard(target: str, draft: str, dtype: str, spec, threads: int, prompts: list[list[int]],
                  index: list[int]) -> list:
    """One Ray task: load the pair, record these prompts as one process would (same threads)."""
    import torch

    fail_once = os.environ.get(FAIL_ONCE_ENV)
    if fail_once and not os.path.exists(os.path.join(fail_once, "failed")):
        open(os.path.join(fail_once, "failed"), "w").close()
        os._exit(1)  # a killed worker: Ray retries the task
    torch.set_num_threads(threads)
    from simspec.engine.load import load_pair
    from simspec.measure.recorder import TraceRecorder

    device = "cuda" if torch.cuda.is_available() else "cpu"
    loaded, drafter = load_pair(target, draft, device, dtype=dtype)
    return TraceRecorder(loaded, drafter, spec).record_all(prompts, lambda name, n: (lambda *a: None), index)


def record_sharded(target: str, draft: str, dtype: str, spec, prompts: list[list[int]], address: str, workers: int,
                   threads: int, tick: Callable[..., None]) -> list:
    """Every prompt's trace, recorded by Ray tasks, in the prompts' order."""
    from simspec.cluster import connect, failed
    from simspec.measure.recorder import CONTINUATION_BATCH

    ray, gpus = connect(address, workers, threads)
    task = ray.remote(_record_shard).options(num_cpus=threads, num_gpus=1 if gpus else 0, max_retries=MAX_RETRIES,
                                             retry_exceptions=True)
    shards = shard_prompts(prompts, workers, CONTINUATION_BATCH)
    pending = {task.remote(target, draft, dtype, spec, threads, [prompts[i] for i in shard], shard): shard
               for shard in shards}
    recorded: dict[int, object] = {}
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            shard = pending.pop(done[0])
            recorded.update(zip(shard, ray.get(done[0])))
            tick(len(shard))
    except ray.exceptions.RayError as exc:
        raise failed(ray, exc, pending, "a trace shard", MAX_RETRIES) from None
    return [recorded[i] for i in range(len(prompts))]
