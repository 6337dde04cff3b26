"""``simspec load --real``: each request stream served by the real engine (``simspec.engine.speculative``
with ``arrivals``) in real time, plainly and with every method, beside the simulator's replay of
the same stream. The engine pads every forward to its ``max_batch`` rows, so the replay that
predicts it prices every cycle at that batch size (``replay_load(..., padded=True)``). Every
request's output under a method is checked against its plain greedy decode in the same stream
(greedy profiles; at T > 0 outputs differ by design and are not compared here)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from simspec.errors import SimspecError
from simspec.sim.load import LoadResult


def serve_real(profile, scored, streams: list, methods: list, max_batch: int, max_new_tokens: int,
               status: Callable[[str], object]) -> list[tuple[LoadResult, bool | None]]:
    """Per stream, per method (plain decoding first): the real run's latencies and whether every
    output equals its plain greedy decode (None at T > 0)."""
    from simspec.engine.speculative import SpeculativeEngine
    from simspec.measure.interleave import load_engine

    if not scored.has_prompt_tokens:
        raise SimspecError(f"the traces of {profile.directory} hold no prompt tokens, which load --real serves: record "
                           "them again (`simspec calibrate --traces-only ... --force`)")
    starts = np.concatenate([[0], np.cumsum(scored.prompt_lengths)])
    ids = [scored.prompt_tokens[starts[i]:starts[i + 1]].tolist() for i in range(scored.n_prompts)]
    with status("loading the profile's target and drafter"):
        engine, _ = load_engine(profile, [], max_new_tokens, status)
    for one in ids:
        engine.check_length(one, max_new_tokens + scored.depth_max)
    rows = SpeculativeEngine(engine.target, engine.drafter, engine.sampling, batch_size=max_batch)
    out = []
    for stream in streams:
        prompts = [ids[p] for p in stream.prompt]
        reference = None
        for method in methods:
            with status(f"serving {len(prompts)} requests for real ({stream.meta['kind']}"
                        + (f", {stream.meta['rate']:g}/s" if "rate" in stream.meta else "")
                        + f"): {'plain' if method is None else method.name}"):
                run = rows.decode(prompts, method, max_new_tokens, arrivals=list(stream.arrival))
            outputs = [g.tokens for g in run.generations]
            reference = reference or outputs
            lossless = None if not engine.sampling.greedy else outputs == reference
            gens = run.generations
            out.append((LoadResult("plain" if method is None else method.name, np.asarray(stream.arrival, float),
                                   np.array([g.first_token_at for g in gens]), np.array([g.finished_at for g in gens]),
                                   np.array([len(g.tokens) for g in gens]), run.cycles, max_batch), lossless))
    return out
