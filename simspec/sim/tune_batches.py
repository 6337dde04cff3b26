"""``simspec tune --batch-sizes 1,2,4,8``: the best speculative setting at each batch size, in
the per-batch-size configuration the serving engines read (numpy only).

Each batch size B is tuned as ``tune --batch-size B`` tunes one, for trees and for chains. The
engines' formats, read from their code (SGLang 0.5.23, vLLM 0.33.0):

- SGLang varies only the number of draft steps by batch size, and only for chains: its adaptive
  speculative decoding (``--speculative-adaptive --speculative-adaptive-config FILE``, EAGLE /
  EAGLE-3 with ``--speculative-eagle-topk 1``) reads a JSON object whose integer keys are the
  lower bounds of batch-size bands, each with ``candidate_steps`` (0: no drafting); within a
  band it moves among the candidates by the acceptance it sees. A batch is first padded up to
  the next CUDA-graph batch size, then takes the band of the largest key at or below it. Here
  each band's candidates are its best and runner-up chain (``num_steps`` = D - 1), and the
  starting ``--speculative-num-steps`` is batch 1's best (it must be a candidate). Trees (top-k
  above 1) have no per-batch setting in SGLang: their best per batch size is listed as flags.
- vLLM drafts chains and reads ``num_speculative_tokens_per_batch_size`` in its
  ``speculative_config``: ``[start, end, K]`` ranges of batch sizes, inclusive, the first starting
  at 1; batch sizes past the last range keep its K; every K is capped at
  ``num_speculative_tokens`` (required: it sizes the buffers). Here each tuned batch size starts a
  range that ends before the next one, K = D - 1 of its best chain.
- TensorRT-LLM drafts chains and reads ``draft_len_schedule`` in its ``speculative_config``
  (LLM API): batch size -> draft length, a batch taking the smallest key at or above its size,
  nothing drafted past the largest key (max-concurrency control); ``max_draft_len`` sizes the
  buffers. Here each tuned batch size is a key, its value K = D - 1 of its best chain.
"""

from __future__ import annotations

import json

import numpy as np

from simspec.errors import SimspecError


def _best(train, held, cost, max_new_tokens, chain: bool) -> dict:
    from simspec.policies.base import StaticPolicy
    from simspec.sim.evaluate import ranking, tree_surface
    from simspec.sim.replay import mean_speedup, replay

    surface = tree_surface(train, cost, max_new_tokens, chain)
    ranked = ranking(surface)
    (depth, size), runner = ranked[0], ranked[1] if len(ranked) > 1 else ranked[0]
    held_speedup = mean_speedup(replay(held, cost, StaticPolicy(depth, train.width, size), max_new_tokens))
    return {"depth": depth, "size": size, "speedup": held_speedup, "runner_up": {"depth": runner[0], "size": runner[1]}}


def per_batch(profile, train, held, batch_sizes: tuple[int, ...], max_new_tokens: int | None) -> list[dict]:
    """Per batch size: the best tree and the best chain (and its runner-up), held-out speedups."""
    if 1 not in batch_sizes:
        raise SimspecError("--batch-sizes tunes for the batch sizes a server sees, from 1: include 1, e.g. 1,2,4,8")
    costs = {batch: profile.cost.at_batch(batch) for batch in sorted(set(batch_sizes))}
    return [{"batch_size": batch, "tree": _best(train, held, cost, max_new_tokens, False),
             "chain": _best(train, held, cost, max_new_tokens, True)} for batch, cost in costs.items()]


def sglang_adaptive(rows: list[dict]) -> dict:
    """SGLang's adaptive-speculation file: a band per tuned batch size, its candidate steps."""
    return {str(row["batch_size"]): {"candidate_steps": sorted({row["chain"]["depth"] - 1,
                                                                row["chain"]["runner_up"]["depth"] - 1})}
            for row in rows}


def engine_config(engine: str, rows: list[dict], draft: str, width: int) -> dict:
    """The per-batch-size settings in ``engine``'s own format, and the command-line text."""
    if engine == "sglang":
        adaptive = sglang_adaptive(rows)
        start = rows[0]["chain"]["depth"] - 1
        flags = (f"--speculative-algorithm EAGLE3 --speculative-draft-model-path {draft} --speculative-eagle-topk 1 "
                 f"--speculative-num-steps {start} --speculative-num-draft-tokens {start + 1} "
                 "--speculative-adaptive --speculative-adaptive-config adaptive.json")
        trees = {str(r["batch_size"]): f"--speculative-num-steps {r['tree']['depth'] - 1} --speculative-eagle-topk "
                 f"{width} --speculative-num-draft-tokens {r['tree']['size']}" for r in rows}
        return {"adaptive_config": adaptive, "flags": flags, "trees_by_batch": trees}
    if engine == "vllm":
        sizes = [r["batch_size"] for r in rows]  # a range per tuned batch size
        ends = [s - 1 for s in sizes[1:]] + [sizes[-1]]
        ranges = [[start, end, row["chain"]["depth"] - 1] for start, end, row in zip(sizes, ends, rows)]
        config = {"method": "eagle3", "model": draft, "num_speculative_tokens": max(1, max(k for *_, k in ranges)),
                  "num_speculative_tokens_per_batch_size": ranges}
        return {"speculative_config": config, "flags": f"--speculative-config '{json.dumps(config)}'"}
    if engine == "trtllm":
        schedule = {str(r["batch_size"]): r["chain"]["depth"] - 1 for r in rows}
        config = {"decoding_type": "Eagle3", "speculative_model": draft,
                  "max_draft_len": max(1, *schedule.values()), "draft_len_schedule": schedule}
        return {"speculative_config": config, "flags": json.dumps({"speculative_config": config})}
    table = {str(r["batch_size"]): {"depth": r["tree"]["depth"], "width": width, "size": r["tree"]["size"]}
             for r in rows}
    return {"trees_by_batch": table, "flags": json.dumps(table)}


LOAD_DRAFT_LENS = (0, 1, 2, 3, 4, 5, 7)  # the draft lengths K a band may take; 0 drafts nothing


def for_load(profile, train, held, rows: list[dict], rate: float, tpot_s: float, duration: float, seed: int,
             max_new_tokens: int | None) -> dict:
    """The draft length per batch-size band that serves a Poisson stream at ``rate`` best
    (``sim.load.better``) through ``max(batch sizes)`` rows, by TensorRT-LLM's ``draft_len_schedule``
    rule. Coordinate descent from the throughput-tuned chains on a stream of train prompts; the
    choice, the throughput-tuned schedule and plain decoding then serve a held-out stream."""
    from simspec.policies.rules.serving import DraftLenSchedule
    from simspec.sim.evaluate import decision_charges
    from simspec.sim.load import better, replay_load
    from simspec.sim.stream import poisson

    sizes = [r["batch_size"] for r in rows]
    charge = decision_charges(profile.meta).get("static", 0.0)
    lens = [k for k in LOAD_DRAFT_LENS if k < train.depth_max]

    def served(traces, schedule, stream) -> dict:
        policy = None if schedule is None else DraftLenSchedule(dict(zip(sizes, schedule)), traces.width,
                                                                traces.depth_max)
        return replay_load(traces, profile.cost, policy, stream, max(sizes), max_new_tokens,
                           0.0 if policy is None else charge, seed).summary(tpot_s)

    stream = poisson(rate, duration, np.arange(train.n_prompts), seed)
    start = [min(r["chain"]["depth"] - 1, max(lens)) for r in rows]
    best, score = list(start), served(train, start, stream)
    first, changed = score, True
    while changed:
        changed = False
        for band in range(len(sizes)):
            for k in (k for k in lens if k != best[band]):
                trial = best[:band] + [k] + best[band + 1:]
                trial_score = served(train, trial, stream)
                if better(trial_score, score) > 0:
                    best, score, changed = trial, trial_score, True
    scoring = poisson(rate, duration, np.arange(held.n_prompts), seed)
    return {"rate": rate, "tpot_target_s": tpot_s, "duration_s": duration, "max_batch": max(sizes),
            "draft_lens": dict(zip(map(str, sizes), best)), "throughput_tuned": dict(zip(map(str, sizes), start)),
            "heldout": {"tuned": served(held, best, scoring), "throughput_tuned": served(held, start, scoring),
                        "plain": served(held, None, scoring)}, "train": {"tuned": score, "throughput_tuned": first}}


def load_rows(rows: list[dict], draft_lens: dict[str, int]) -> list[dict]:
    """``rows`` with each batch size's chain set to the load-tuned draft length."""
    chains = {b: {"depth": k + 1, "size": k + 1} for b, k in draft_lens.items()}
    return [{**row, "chain": {**chains[str(row["batch_size"])], "runner_up": chains[str(row["batch_size"])]}}
            for row in rows]
